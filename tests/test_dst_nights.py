"""The scheduler through Berlin's transition nights, on a clock the test controls: every slot of the
skipped hour runs once, shifted by the gap, and each slot of the repeated hour runs once, at its
first occurrence, whether dispatched on time, caught up after a downtime over the night, or
backfilled; the slot report, "why", the schedule preview and the job page's next runs say the same.

The expected slots come from the test's own oracle (tests/dst_oracle.py), not from the service.
The scheduler's tick is ``dispatch.dispatch_due`` at the test's moment (the leader calls it with the
database's clock, which a test cannot move to 2027).
"""

from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.test import Client

from jobs.definitions.jobs import save_job
from jobs.models import CatchupPolicy, Job, JobRun, RunStatus, RunTrigger
from jobs.scheduling import dispatch

from . import dst_oracle
from .api_personas import make_personas

BERLIN = ZoneInfo("Europe/Berlin")
QUARTERS_OF_TWO = "*/15 2 * * *"
# The instants Berlin's clocks change: 02:00 CET -> 03:00 CEST, and 03:00 CEST -> 02:00 CET.
NIGHTS_2027 = {"spring": datetime(2027, 3, 28, 1, 0, tzinfo=UTC), "autumn": datetime(2027, 10, 31, 1, 0, tzinfo=UTC)}
NIGHTS_2026 = {"spring": datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "autumn": datetime(2026, 10, 25, 1, 0, tzinfo=UTC)}
AROUND = timedelta(hours=2)  # the stretch of the night the test looks at, either side of the change
TICK = timedelta(seconds=15)


def expected_slots(change, expression=QUARTERS_OF_TWO):
    slots = dst_oracle.slots_between(expression, "Europe/Berlin", change - AROUND, change + AROUND)
    assert len(slots) == 4  # the four quarters of 02:00-02:59, once each (the oracle, checked)
    return slots


def local(slots):
    return [slot.astimezone(BERLIN).strftime("%H:%M %Z") for slot in slots]


def night_job(name, change, **fields):
    """A job on QUARTERS_OF_TWO in Berlin, saved two hours before the change."""
    with time_machine.travel(change - AROUND, tick=False):
        return save_job(Job(name=name, kind="callable", target="builtin.noop", **fields),
                        {"type": "cron", "cron": QUARTERS_OF_TWO, "timezone": "Europe/Berlin"})


def tick(now, capture):
    with time_machine.travel(now, tick=False), capture(execute=True):  # published once it commits
        return dispatch.dispatch_due(now=now)


def runs_per_slot(job):
    return Counter(JobRun.objects.filter(job=job).values_list("scheduled_for", flat=True))


@pytest.mark.django_db
def test_the_scheduler_ticking_through_both_nights_runs_every_slot_once(redis_client,
                                                                        django_capture_on_commit_callbacks):
    for night, change in NIGHTS_2027.items():
        job = night_job(f"quarters-{night}", change)
        now = change - AROUND + timedelta(seconds=3)
        while now < change + AROUND:
            tick(now, django_capture_on_commit_callbacks)
            now += TICK

        expected = expected_slots(change)
        assert runs_per_slot(job) == Counter(expected), (night, local(expected))
        assert set(job.runs.values_list("trigger", "status")) == {(RunTrigger.SCHEDULE, RunStatus.QUEUED)}
        job.refresh_from_db()
        following = dst_oracle.slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change + AROUND,
                                             change + timedelta(days=2))
        assert job.next_run_at == following[0]  # 02:00 the next night
    assert local(expected_slots(NIGHTS_2027["spring"])) == ["03:00 CEST", "03:15 CEST", "03:30 CEST", "03:45 CEST"]


@pytest.mark.django_db
def test_a_downtime_over_the_night_catches_up_or_skips_every_slot_once(redis_client,
                                                                       django_capture_on_commit_callbacks):
    for night, change in NIGHTS_2027.items():
        caught_up = night_job(f"all-{night}", change, catchup_policy=CatchupPolicy.ALL, catchup_max=10)
        skipped = night_job(f"none-{night}", change, catchup_policy=CatchupPolicy.NONE)
        tick(change - AROUND + timedelta(seconds=3), django_capture_on_commit_callbacks)
        # The scheduler is down for the night and back two hours after the change.
        tick(change + AROUND, django_capture_on_commit_callbacks)

        expected = Counter(expected_slots(change))
        assert runs_per_slot(caught_up) == expected, night
        assert set(caught_up.runs.values_list("status", flat=True)) == {RunStatus.QUEUED}
        assert runs_per_slot(skipped) == expected, night
        assert set(skipped.runs.values_list("status", "reason")) == {
            (RunStatus.SKIPPED, "missed: catch-up policy 'none'")}


@pytest.mark.django_db
def test_a_backfill_over_the_night_runs_every_slot_once_and_the_report_why_and_slots_page_agree(redis_client):
    people = make_personas()
    client = people.client(people.owner)
    browser = Client()
    browser.force_login(people.owner)
    for night, change in NIGHTS_2026.items():
        job = night_job(f"backfilled-{night}", change, owner=people.owner, group=people.team)
        body = {"start": (change - AROUND).isoformat(), "end": (change + AROUND).isoformat()}

        response = client.post(f"/api/jobs/{job.pk}/backfill/", body, format="json")

        expected = expected_slots(change)
        assert response.status_code == 202, response.json()
        assert runs_per_slot(job) == Counter(expected), night
        runs = dict(job.runs.values_list("scheduled_for", "pk"))
        report = client.get(f"/api/jobs/{job.pk}/slots/", body).json()
        assert [(slot["scheduled_for"], slot["outcome"], slot["run"]["id"]) for slot in report["slots"]] == [
            (at.isoformat().replace("+00:00", "Z"), "ran", runs[at]) for at in expected]
        for at in expected:
            why = client.get(f"/api/jobs/{job.pk}/why/", {"at": at.isoformat()}).json()
            assert why["explanation"].startswith(f"It ran: run #{runs[at]} (backfill) for "
                                                 f"{at:%Y-%m-%d %H:%M:%S} UTC"), why
        page = browser.get(f"/jobs/{job.pk}/slots/", {"from": f"{(change - AROUND).astimezone(BERLIN):%Y-%m-%dT%H:%M}",
                                                      "to": f"{(change + AROUND).astimezone(BERLIN):%Y-%m-%dT%H:%M}"})
        rows = page.content.decode()
        assert rows.count('class="slot-ran"') == len(expected), night
        assert all(f"<td>{at.astimezone(BERLIN):%a %Y-%m-%d %H:%M:%S %Z}</td>" in rows for at in expected), night


@pytest.mark.django_db
def test_the_schedule_preview_and_the_job_page_show_every_slot_of_the_night(redis_client):
    people = make_personas()
    browser = Client()
    for night, change in NIGHTS_2027.items():
        job = night_job(f"previewed-{night}", change, owner=people.owner, group=people.team)
        first_ten = dst_oracle.slots_between(QUARTERS_OF_TWO, "Europe/Berlin", change - AROUND,
                                             change + timedelta(days=4))[:10]
        shown = [slot.astimezone(BERLIN).strftime("%a %Y-%m-%d %H:%M:%S %Z") for slot in first_ten]

        with time_machine.travel(change - AROUND, tick=False):
            browser.force_login(people.owner)  # a session of that day
            preview = browser.get("/jobs/schedule-preview/", {"schedule_type": "cron", "cron": QUARTERS_OF_TWO,
                                                              "timezone": "Europe/Berlin"}).json()
            page = browser.get(f"/jobs/{job.pk}/").content.decode()

        assert preview["slots"] == shown, night
        assert all(f"<li>{text} " in page for text in shown), night
        assert shown[:4] == [f"Sun {slot:%Y-%m-%d %H:%M:%S %Z}" for slot in
                             (at.astimezone(BERLIN) for at in expected_slots(change))]
