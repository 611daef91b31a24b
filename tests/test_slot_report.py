"""Every slot accounted for: ran, skipped (with the reason, also for a paused or disabled job),
missing (an alert), in the API, on the pages and on the command line."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, RunTrigger
from jobs.operations import slot_report
from notifications.models import Delivery

from .conftest import wait_for
from .test_notifications_support import RecordingHTTPServer, channel_with_rule, send_pending

# Missed alerts go to a webhook on this machine's loopback.
pytestmark = pytest.mark.usefixtures("local_http_allowed")

DAY = datetime(2026, 11, 20, tzinfo=UTC)
LATER = DAY + timedelta(days=1)


def at(hours, minutes=0):
    return DAY + timedelta(hours=hours, minutes=minutes)


@pytest.fixture
def history(people):
    """An hourly job over six hours of 2026-11-20: 00:00 and 01:00 ran, 02:00 was skipped by the
    overlap policy, it was paused through the API at 02:30 and resumed at 04:30, and 05:00 left no
    record at all."""
    with time_machine.travel(at(-1), tick=False):
        job = save_job(Job(name="hourly", kind="callable", target="builtin.noop", owner=people.owner,
                           group=people.team), {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    for hour in (0, 1):
        JobRun.objects.create(job=job, scheduled_for=at(hour), status=RunStatus.SUCCEEDED)
    JobRun.objects.create(job=job, scheduled_for=at(2), status=RunStatus.SKIPPED,
                          reason="overlap: run #7 was still active")
    client = people.client(people.owner)
    with time_machine.travel(at(2, 30), tick=False):
        assert client.post(f"/api/jobs/{job.pk}/pause/").status_code == 200
    with time_machine.travel(at(4, 30), tick=False):
        assert client.post(f"/api/jobs/{job.pk}/resume/").status_code == 200
    return job


def outcomes(report):
    return [(slot.at.hour, slot.outcome) for slot in report.slots]


def test_each_slot_says_what_became_of_it(history):
    report = slot_report.build(history, at(0), at(6), now=LATER)

    assert outcomes(report) == [(0, "ran"), (1, "ran"), (2, "skipped"), (3, "skipped"), (4, "skipped"),
                                (5, "missing")]
    assert report.slots[2].reason == "overlap: run #7 was still active"
    assert report.slots[3].reason == "job paused by owner (API) at 2026-11-20 02:30:00 UTC"
    assert report.slots[4].reason == report.slots[3].reason
    assert report.slots[0].run.status == RunStatus.SUCCEEDED


def test_a_job_disabled_by_an_edit_is_explained_as_disabled(people):
    with time_machine.travel(at(-1), tick=False):
        job = save_job(Job(name="edited", kind="callable", target="builtin.noop", owner=people.owner),
                       {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    with time_machine.travel(at(0, 30), tick=False):
        people.client(people.owner).patch(f"/api/jobs/{job.pk}/", {"enabled": False}, format="json")

    report = slot_report.build(job, at(1), at(2), now=LATER)

    assert outcomes(report) == [(1, "skipped")]
    assert report.slots[0].reason == "job disabled by owner (API) at 2026-11-20 00:30:00 UTC"


def writes(queries):
    return [q["sql"] for q in queries if q["sql"].lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]


def test_reading_a_missing_slot_writes_nothing_and_the_periodic_check_alerts_it_once(people, history):
    page = Client()
    page.force_login(people.owner)
    out = StringIO()
    with RecordingHTTPServer() as server:
        channel_with_rule("webhook", {"url": server.url}, ["missed"])
        with time_machine.travel(LATER, tick=False), CaptureQueriesContext(connection) as queries:
            report = slot_report.build(history, at(0), at(6))
            api = people.client(people.owner).get(f"/api/jobs/{history.pk}/slots/",
                                                  {"start": "2026-11-20T00:00:00Z", "end": "2026-11-20T06:00:00Z"})
            slots_page = page.get(f"/jobs/{history.pk}/slots/", {"from": "2026-11-20T00:00", "to": "2026-11-20T06:00"})
            why = page.get(f"/jobs/{history.pk}/", {"why": "2026-11-20T05:00"})
            with pytest.raises(CommandError, match="1 slot\\(s\\) missing: the periodic check raises"):
                call_command("jobs", "slots", "hourly", "--from", "2026-11-20T00:00", "--to", "2026-11-20T06:00",
                             stdout=out)
            call_command("jobs", "why", "hourly", "2026-11-20T05:00", stdout=out)

        assert [slot.at for slot in report.missing] == [at(5)]
        assert api.json()["counts"]["missing"] == 1 and slots_page.status_code == 200
        missing = ("Missing: nothing was recorded for the slot at 2026-11-20 05:00:00 UTC; an alert is raised by the "
                   "periodic check.")
        assert missing in why.content.decode() and missing in out.getvalue()
        assert writes(queries.captured_queries) == []
        assert not Delivery.objects.exists()

        assert slot_report.check_recent(now=at(5, 30), window=3 * 3600)["missing"] == 1
        # Looked at again (another pass that read the job before the first moved it on): one alert.
        Job.objects.filter(pk=history.pk).update(slot_check_from=None)
        assert slot_report.check_recent(now=at(5, 30), window=3 * 3600)["missing"] == 1
        assert Delivery.objects.filter(event="missed").count() == 1
        send_pending()
        [body] = server.json_bodies()
    assert body["event"] == "missed"
    assert body["job"]["name"] == "hourly"
    assert body["run"]["id"] is None
    assert body["run"]["scheduled_for"] == at(5).isoformat()


def test_recent_and_future_slots_are_due_or_upcoming_not_missing(history):
    report = slot_report.build(history, at(5), at(8), now=at(6, 0) + timedelta(seconds=10))
    assert outcomes(report) == [(5, "missing"), (6, "due"), (7, "upcoming")]


def test_slots_before_the_job_existed_are_not_checked(history):
    report = slot_report.build(history, at(-5), at(1), now=LATER)
    assert report.checked_from == history.created_at
    assert outcomes(report) == [(0, "ran")]


def test_an_interval_job_run_counts_for_the_interval_it_falls_in(people):
    with time_machine.travel(at(-1), tick=False):
        job = save_job(Job(name="every-10-min", kind="callable", target="builtin.noop"),
                       {"type": "interval", "every_seconds": 600})
    Job.objects.filter(pk=job.pk).update(next_run_at=at(3))
    job.refresh_from_db()
    JobRun.objects.create(job=job, scheduled_for=at(0, 3), status=RunStatus.SUCCEEDED)  # an older grid
    JobRun.objects.create(job=job, scheduled_for=at(0, 10), status=RunStatus.FAILED)
    JobRun.objects.create(job=job, scheduled_for=at(0, 25), status=RunStatus.SUCCEEDED, trigger=RunTrigger.MANUAL)

    report = slot_report.build(job, at(0), at(0, 30), now=LATER, alert=False)

    assert [(slot.at.minute, slot.outcome, slot.run and slot.run.status) for slot in report.slots] == [
        (0, "ran", "succeeded"), (10, "ran", "failed"), (20, "missing", None)]


def test_the_api_lists_each_slot_with_its_run(people, history):
    client = people.client(people.teammate)
    with time_machine.travel(LATER, tick=False):
        response = client.get(f"/api/jobs/{history.pk}/slots/",
                              {"start": "2026-11-20T00:00:00Z", "end": "2026-11-20T06:00:00+00:00"})

    assert response.status_code == 200
    data = response.json()
    assert data["counts"] == {"ran": 2, "skipped": 3, "missing": 1, "due": 0, "upcoming": 0}
    assert data["slots"][0]["run"]["status"] == "succeeded"
    assert data["slots"][3] == {"scheduled_for": "2026-11-20T03:00:00Z", "outcome": "skipped",
                                "reason": "job paused by owner (API) at 2026-11-20 02:30:00 UTC", "run": None}
    assert people.client(people.outsider).get(f"/api/jobs/{history.pk}/slots/").status_code == 404


def test_the_api_refuses_a_range_of_too_many_slots(people, history):
    response = people.client(people.owner).get(f"/api/jobs/{history.pk}/slots/",
                                               {"start": "2026-11-20T00:00:00Z", "end": "2027-01-01T00:00:00Z"})
    assert response.status_code == 400
    assert "more than 1000 slots" in response.json()["end"][0]
    response = people.client(people.owner).get(f"/api/jobs/{history.pk}/slots/", {"start": "soon"})
    assert response.status_code == 400 and "start" in response.json()


def test_the_job_page_answers_why_it_did_not_run_at_three_in_one_line(people, history):
    client = Client()
    client.force_login(people.owner)
    with time_machine.travel(LATER, tick=False):
        page = client.get(f"/jobs/{history.pk}/", {"why": "2026-11-20T03:00"}).content.decode()
        ran = client.get(f"/jobs/{history.pk}/", {"why": "2026-11-20T01:00"}).content.decode()
        slots = client.get(f"/jobs/{history.pk}/slots/", {"from": "2026-11-20T00:00", "to": "2026-11-20T06:00"})

    assert ("Skipped: the slot at 2026-11-20 03:00:00 UTC was not run: job paused by owner (API) at "
            "2026-11-20 02:30:00 UTC.") in page
    assert "It ran: run #" in ran and "is succeeded" in ran
    text = slots.content.decode()
    assert slots.status_code == 200
    assert text.count('class="slot-skipped"') == 3 and text.count('class="slot-missing"') == 1
    assert "the periodic check raises a “missed” alert" in text


def test_the_command_line_lists_the_slots_and_fails_on_a_missing_one(history):
    out = StringIO()
    with time_machine.travel(LATER, tick=False):
        call_command("jobs", "why", "hourly", "2026-11-20T04:00", stdout=out)
        with pytest.raises(CommandError, match="1 slot\\(s\\) missing"):
            call_command("jobs", "slots", "hourly", "--from", "2026-11-20T00:00", "--to", "2026-11-20T06:00",
                         stdout=out)
    text = out.getvalue()
    assert "Skipped: the slot at 2026-11-20 04:00:00 UTC was not run: job paused by owner (API)" in text
    assert "2 ran, 3 skipped, 1 missing, 0 due, 0 upcoming" in text


def test_ranges_at_the_edges_of_the_calendar_are_answered_not_crashed_on(people, history):
    client = people.client(people.owner)
    for start, end in [("0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z"),
                       ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"),
                       ("9999-12-31T00:00:00Z", "9999-12-31T23:59:59Z")]:
        slots = client.get(f"/api/jobs/{history.pk}/slots/", {"start": start, "end": end})
        backfill = client.post(f"/api/jobs/{history.pk}/backfill/", {"start": start, "end": end}, format="json")
        assert slots.status_code in (200, 400), (start, end, slots.content)
        assert backfill.status_code == 400, (start, end, backfill.content)
    page = Client()
    page.force_login(people.owner)
    assert page.get(f"/jobs/{history.pk}/", {"why": "9999-12-31T23:59"}).status_code == 200
    assert page.get(f"/jobs/{history.pk}/slots/", {"from": "0001-01-01T00:00"}).status_code == 200


def test_the_periodic_check_alerts_recent_missing_slots_once(history):
    with RecordingHTTPServer() as server:
        channel_with_rule("webhook", {"url": server.url}, ["missed"])
        now = at(5, 30)
        assert slot_report.check_recent(now=now, window=3 * 3600) == {"jobs": 2, "missing": 1, "unchecked": 0}
        # Each slot is looked at once: the next pass reads only the jobs with a slot since.
        assert slot_report.check_recent(now=now, window=3 * 3600) == {"jobs": 0, "missing": 0, "unchecked": 0}
        assert slot_report.check_recent(now=now + timedelta(hours=1), window=3 * 3600)["missing"] == 1
        send_pending()
        assert [(body["event"], body["run"]["scheduled_for"]) for body in server.json_bodies()] == [
            ("missed", at(5).isoformat()), ("missed", at(6).isoformat())]


def test_the_scheduler_has_a_worker_look_for_missing_slots(processes):
    with RecordingHTTPServer() as server:
        channel_with_rule("webhook", {"url": server.url}, ["missed"])
        with time_machine.travel(datetime.now(UTC) - timedelta(hours=1)):
            job = save_job(Job(name="skipped-by-a-bug", kind="callable", target="builtin.noop"),
                           {"type": "interval", "every_seconds": 2})
        # As if the scheduler had jumped over slots without recording them.
        Job.objects.filter(pk=job.pk).update(next_run_at=datetime.now(UTC) + timedelta(hours=1))
        processes.worker()
        processes.beat(JOBS_SLOT_CHECK_SECONDS=2, JOBS_MISFIRE_GRACE_SECONDS=1)

        wait_for(lambda: server.requests, timeout=60, message="a missed alert")
        body = server.json_bodies()[0]
        assert (body["event"], body["job"]["name"]) == ("missed", "skipped-by-a-bug")
        assert not JobRun.objects.filter(job=job).exists()


def cron_job(people, name, cron):
    with time_machine.travel(at(-1), tick=False):
        return save_job(Job(name=name, kind="callable", target="builtin.noop", owner=people.owner, group=people.team),
                        {"type": "cron", "cron": cron, "timezone": "UTC"})


def check(now, window=3600):
    with time_machine.travel(now, tick=False):
        return slot_report.check_recent(now=now, window=window)


def window_end(now):
    return now - timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + 5 * settings.JOBS_TICK_SECONDS)


def test_a_pass_reads_only_the_jobs_with_a_slot_since_the_last_one(people):
    Job.objects.update(enabled=False)  # the personas' job
    every_minute = cron_job(people, "every-minute", "* * * * *")
    hourly = cron_job(people, "hourly-at-ten-past", "10 * * * *")
    daily = cron_job(people, "daily-at-three", "0 3 * * *")

    assert check(at(5, 30))["jobs"] == 3  # none looked at yet
    end = window_end(at(5, 30))
    first_minute = end.replace(second=0, microsecond=0) + timedelta(minutes=1 if end.second or end.microsecond else 0)
    assert {job.name: job.slot_check_from for job in Job.objects.filter(enabled=True)} == {
        "every-minute": first_minute, "hourly-at-ten-past": at(6, 10), "daily-at-three": at(24 + 3)}

    # No run was recorded: every minute since the last pass is missing, and only that job is read.
    assert check(at(5, 40)) == {"jobs": 1, "missing": 10, "unchecked": 0}
    assert check(at(6, 30)) == {"jobs": 2, "missing": 50 + 1, "unchecked": 0}
    assert Job.objects.get(pk=daily.pk).slot_check_from == at(24 + 3)
    assert Job.objects.get(pk=hourly.pk).slot_check_from == at(7, 10)
    assert Job.objects.get(pk=every_minute.pk).slot_check_from > window_end(at(6, 30))


def test_an_edited_or_resumed_job_is_looked_at_again_from_its_change(people):
    Job.objects.update(enabled=False)
    daily = cron_job(people, "daily-at-three", "0 3 * * *")
    check(at(5, 0))
    assert Job.objects.get(pk=daily.pk).slot_check_from == at(24 + 3)

    api = people.client(people.owner)
    with time_machine.travel(at(5, 2), tick=False):
        edited = api.patch(f"/api/jobs/{daily.pk}/", {"schedule": {"type": "cron", "cron": "*/5 * * * *",
                                                                   "timezone": "UTC"}}, format="json")
    assert edited.status_code == 200, edited.content
    assert Job.objects.get(pk=daily.pk).slot_check_from is None
    # The slots of the new schedule, from its change on: 05:05 to 06:00, none ran.
    assert check(at(6, 0) + timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + 5 * settings.JOBS_TICK_SECONDS
                                      + 1)) == {"jobs": 1, "missing": 12, "unchecked": 0}

    with time_machine.travel(at(6, 1), tick=False):
        assert api.post(f"/api/jobs/{daily.pk}/pause/").status_code == 200
    with time_machine.travel(at(7, 1), tick=False):
        assert api.post(f"/api/jobs/{daily.pk}/resume/").status_code == 200
    assert Job.objects.get(pk=daily.pk).slot_check_from is None
    found = check(at(7, 30), window=2 * 3600)
    # Looked at from the window's start again: 05:30 to 06:00 missing, 06:05 to 07:00 skipped
    # (paused), 07:05 on missing as far as the window's end reaches.
    end = window_end(at(7, 30))
    report = slot_report.build(Job.objects.get(pk=daily.pk), end - timedelta(hours=2), end, now=at(7, 30))
    assert found == {"jobs": 1, "missing": len(report.missing), "unchecked": 0}
    assert at(6, 0) in [slot.at for slot in report.missing] and at(7, 5) in [slot.at for slot in report.missing]
    assert report.count("skipped") == 12


def test_a_pass_does_not_move_on_a_job_saved_since_it_read_it(people):
    Job.objects.update(enabled=False)
    job = cron_job(people, "hourly", "0 * * * *")
    stale = Job.objects.get(pk=job.pk)
    with time_machine.travel(at(0, 30), tick=False):
        save_job(Job.objects.get(pk=job.pk), {"type": "cron", "cron": "*/5 * * * *", "timezone": "UTC"})
    slot_report.advance([stale], [at(24)])
    assert Job.objects.get(pk=job.pk).slot_check_from is None
    fresh = Job.objects.get(pk=job.pk)
    slot_report.advance([fresh], [at(1)])
    assert Job.objects.get(pk=job.pk).slot_check_from == at(1)
