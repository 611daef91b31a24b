"""The on-time report counts each stretch of time with the schedule in force then: a cron, an
interval and a one-time schedule one after the other (edited through the actions, which write the
audit trail the report reads them back from), a pause between, and runs the test made for some of
the slots. Every figure is checked against the test's own list of slots; manual runs and backfills
are in none of them."""

from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from jobs import lifecycle
from jobs.actions import jobs as actions
from jobs.models import Job, JobRun, RunStatus, RunTrigger
from jobs.operations import reports

from .api_personas import make_personas
from .test_reports import ended_run

D1 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday, weeks from a clock change


def at(day, hour, minute=0):
    return D1 + timedelta(days=day - 1, hours=hour, minutes=minute)


# The test's own ledger: when each schedule was in force, and the slots each one had then.
CREATED, TO_INTERVAL, TO_ONCE, TO_BERLIN = at(1, 10, 30), at(2, 7, 10), at(2, 16), at(3, 12)
PAUSED, RESUMED, NOW = at(4, 1), at(4, 5), at(6, 12)
SLOTS = (
    # "0 */6 * * *" UTC, from its creation to the first edit
    [at(1, 12), at(1, 18), at(2, 0), at(2, 6)]
    # every 5,400 s from the edit: the first slot one interval after it, the last before the next edit
    + [TO_INTERVAL + timedelta(seconds=5400 * k) for k in range(1, 6)]
    # once, at day 3's 09:00
    + [at(3, 9)]
    # "0 3 * * *" Europe/Berlin (02:00 UTC in November), less day 4's, which fell while paused
    + [at(5, 2), at(6, 2)]
)


def make_history(owner):
    actor = actions.Actor(owner, "cli", "127.0.0.1", owner.get_username())
    with time_machine.travel(CREATED, tick=False):
        job = actions.create(actor, Job(name="edited", kind="callable", target="builtin.noop"),
                             {"type": "cron", "cron": "0 */6 * * *", "timezone": "UTC"})
    for moment, schedule in ((TO_INTERVAL, {"type": "interval", "every_seconds": 5400}),
                             (TO_ONCE, {"type": "once", "run_at": at(3, 9).isoformat()}),
                             (TO_BERLIN, {"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Berlin"})):
        with time_machine.travel(moment, tick=False):
            actions.edit(actor, Job.objects.get(pk=job.pk), schedule=schedule)
    for moment, switch in ((PAUSED, actions.pause), (RESUMED, actions.resume)):
        with time_machine.travel(moment, tick=False):
            switch(actor, Job.objects.get(pk=job.pk))
    return Job.objects.select_related("crontab", "interval", "clocked").get(pk=job.pk)


@pytest.mark.django_db
def test_the_report_counts_each_schedule_in_force_through_edits_and_leaves_out_manual_runs_and_backfills():
    assert len(SLOTS) == 12 and SLOTS[4:9][-1] < TO_ONCE <= SLOTS[4:9][-1] + timedelta(seconds=5400)
    owner = make_personas().owner
    job = make_history(owner)
    ran = SLOTS[::2]  # every other slot had its run, started 5 s late: on time
    for slot in ran:
        ended_run(job, slot, RunStatus.SUCCEEDED, start_delay=5, seconds=1.0)
    for hour, trigger in ((13, RunTrigger.MANUAL), (14, RunTrigger.BACKFILL)):
        JobRun.objects.create(job=job, status=RunStatus.SUCCEEDED, trigger=trigger, scheduled_for=at(5, hour),
                              queued_at=at(5, hour), started_at=at(5, hour), finished_at=at(5, hour, 1),
                              max_attempts=1)
    lifecycle.recount_ends()

    report = reports.job_report(job, 7, now=NOW)

    assert report["slots_expected"] == len(SLOTS)
    assert report["slots_with_run"] == len(ran)
    assert report["started_on_time"] == len(ran)
    assert report["missed"] == len(SLOTS) - len(ran)
    assert report["due"] == 0
    by_day = {row["day"]: row["expected"] for row in report["daily"]}
    for n in range(7):
        day = date(2026, 11, 6) - timedelta(days=6 - n) + timedelta(days=1)
        assert by_day[day.isoformat()] == sum(slot.date() == day for slot in SLOTS), day

    # The page and the API say the same, from the same clock.
    client = Client()
    client.force_login(owner)
    with time_machine.travel(NOW, tick=False):
        page = client.get(f"/jobs/{job.pk}/").content.decode()
        api = client.get(f"/api/jobs/{job.pk}/report/?days=7").json()
        report_page = client.get(f"/jobs/{job.pk}/report/?days=7").content.decode()
    assert f"{len(ran)} of {len(SLOTS)} expected slots started on time" in page
    assert (api["slots_expected"], api["slots_with_run"]) == (len(SLOTS), len(ran))
    assert "Manual runs and backfills are not counted" in report_page


@pytest.mark.django_db
def test_an_interval_jobs_recent_slots_are_expected_the_last_one_due_and_stay_through_an_edit():
    """What a user saw on a fresh service: an interval job every 2 s, run for 8 s, said 0 slots
    expected and 3 with a run, and still did after its schedule was changed to a daily cron."""
    owner = make_personas().staff
    actor = actions.Actor(owner, "cli", "127.0.0.1", owner.get_username())
    start = at(6, 11, 50)
    with time_machine.travel(start, tick=False):
        job = actions.create(actor, Job(name="every-2s", kind="callable", target="builtin.noop"),
                             {"type": "interval", "every_seconds": 2})
    slots = [start + timedelta(seconds=2 * k) for k in (1, 2, 3, 4)]  # up to 8.5 s after
    for slot in slots[:3]:
        ended_run(job, slot, RunStatus.SUCCEEDED, start_delay=0.1, seconds=0.5)
    lifecycle.recount_ends()

    report = reports.job_report(Job.objects.get(pk=job.pk), 7, now=start + timedelta(seconds=8.5))
    assert (report["slots_expected"], report["slots_with_run"], report["due"], report["missed"]) == (4, 3, 1, 0)

    with time_machine.travel(start + timedelta(seconds=9), tick=False):
        actions.edit(actor, Job.objects.get(pk=job.pk), schedule={"type": "cron", "cron": "0 3 * * *",
                                                                   "timezone": "UTC"})
    later = Job.objects.select_related("crontab").get(pk=job.pk)
    report = reports.job_report(later, 7, now=start + timedelta(minutes=10))
    assert (report["slots_expected"], report["slots_with_run"], report["due"], report["missed"]) == (4, 3, 0, 1)
