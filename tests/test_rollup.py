"""The figures the pages show (jobs.lifecycle.rollup): every way a run ends is counted once, in its
job's hours and in the hours of every job, whichever path ended it; the fold goes batch by batch;
counting again from the runs gives what folding gave; and with real processes, the leader folds
what the workers end."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

from jobs import lifecycle
from jobs.lifecycle import attempts, rollup
from jobs.models import EndCounts, HourCounts, JobHourCounts, JobRun, RecentRuns, RunEnd, RunStatus, RunTrigger

from .conftest import wait_for
from .test_notifications_support import make_job

COUNTERS = EndCounts.COUNTERS[:-1]  # every counter but the seconds, a float

# A pass folds until its time is up (0.25 s): on a loaded CI machine a pass of three batches ended after two.
UNBOUNDED = 3600


def queued(job, ago=0, trigger=RunTrigger.MANUAL):
    slot = timezone.now() - timedelta(seconds=ago)
    return JobRun.objects.create(job=job, status=RunStatus.QUEUED, trigger=trigger, scheduled_for=slot,
                                 queued_at=slot, max_attempts=job.max_attempts)


def claimed(job):
    run = queued(job)
    assert lifecycle.claim(run.pk, 1, "w1@host", 4242) is not None
    return run


def counted(rows):
    totals = rows.aggregate(**{c: Sum(c) for c in COUNTERS})
    return {c: totals[c] or 0 for c in COUNTERS}


def end_every_way(job):
    """One run ended each way there is; returns how many of each the test expects."""
    lifecycle.record_success(claimed(job).pk, 1, output="by the statement")
    attempts.succeed_by_orm(claimed(job).pk, 1, output="by the ORM")
    lifecycle.record_failure(claimed(job).pk, 1, "boom")
    lifecycle.record_failure(claimed(job).pk, 1, "too slow", timed_out=True)
    lifecycle.record_failure(claimed(job).pk, 1, "its worker died", lost=True)
    late = JobRun.objects.select_related("job").get(pk=queued(job, ago=600, trigger=RunTrigger.SCHEDULE).pk)
    assert lifecycle.miss_if_past_deadline(late, timezone.now())
    now = timezone.now()
    assert lifecycle.create_runs([(job, now - timedelta(hours=3), RunStatus.SKIPPED, "catch-up", None)], now)
    assert lifecycle.cancel(queued(job))
    assert lifecycle.give_up_waiting(queued(job), timezone.now(), "no worker takes its queue")
    # succeeded 2; failed 2 (one never started: no duration); timed out, lost, cancelled 1; skipped 2
    return {"succeeded": 2, "failed": 2, "timed_out": 1, "lost": 1, "skipped": 2, "cancelled": 1, "timed": 4}


@pytest.mark.django_db
def test_every_way_a_run_ends_is_counted_once_for_its_job_and_for_every_job():
    job = make_job(max_retries=0, max_lost_attempts=0, start_deadline_seconds=60)
    other = make_job("other-job")
    expected = end_every_way(job)
    lifecycle.record_success(claimed(other).pk, 1)

    assert RunEnd.objects.count() == 10
    assert lifecycle.fold_ends() == 10
    assert lifecycle.fold_ends() == 0
    assert not RunEnd.objects.exists()

    assert counted(JobHourCounts.objects.filter(job=job)) == expected
    assert counted(HourCounts.objects.all()) == {**expected, "succeeded": 3, "timed": 5}
    points = RecentRuns.objects.get(job=job).points
    assert [status for _run, _ended, _seconds, status in points] == ["succeeded", "succeeded", "failed", "timed_out"]
    assert all(seconds >= 0 for _run, _ended, seconds, _status in points)


@pytest.mark.django_db
def test_a_batch_where_one_job_ended_only_untimed_runs_and_another_a_timed_one_folds():
    # Found by the nemesis (tests/nemesis): one job's hour with only skipped runs (no duration, a
    # whole 0 seconds) beside another's with a succeeded run (float seconds) made a column of mixed
    # types that PostgreSQL's array could not take: every tick's fold failed on the same batch.
    timed, untimed = make_job(), make_job("skipped-only")
    lifecycle.record_success(claimed(timed).pk, 1)
    now = timezone.now()
    assert lifecycle.create_runs([(untimed, now - timedelta(seconds=5), RunStatus.SKIPPED, "overlap", None)], now)

    assert lifecycle.fold_ends() == 2
    assert counted(JobHourCounts.objects.filter(job=timed))["succeeded"] == 1
    assert counted(JobHourCounts.objects.filter(job=untimed))["skipped"] == 1
    assert JobHourCounts.objects.get(job=untimed).seconds == 0
    assert not RunEnd.objects.exists()


@pytest.mark.django_db
def test_the_fold_goes_batch_by_batch_and_stops_when_its_time_is_up():
    job = make_job()
    now = timezone.now()
    lifecycle.create_runs([(job, now - timedelta(minutes=i), RunStatus.SKIPPED, "overlap", None) for i in range(7)],
                          now)

    assert rollup.fold_batch(3) == 3
    assert counted(JobHourCounts.objects.filter(job=job))["skipped"] == 3
    assert lifecycle.fold_ends(batch=1, seconds=0) == 1  # one batch, then the time is up
    assert lifecycle.fold_ends(batch=2, seconds=UNBOUNDED) == 3
    assert counted(JobHourCounts.objects.filter(job=job))["skipped"] == 7
    assert not RunEnd.objects.exists()


@pytest.mark.django_db
def test_counting_again_from_the_runs_gives_what_the_fold_gave():
    jobs = [make_job(f"job-{i}", max_retries=0, max_lost_attempts=0, start_deadline_seconds=60) for i in range(2)]
    for job in jobs:
        end_every_way(job)
    lifecycle.fold_ends()
    folded = figures_now()

    assert lifecycle.recount_ends() == 18
    assert figures_now() == folded


def figures_now():
    # SQLite's date arithmetic (julianday) keeps milliseconds only: the recount's seconds agree to a
    # millisecond a run (a sum of N durations, to N milliseconds).
    def rows(model, key):
        return {key(row): ({c: getattr(row, c) for c in COUNTERS},
                           pytest.approx(row.seconds, abs=0.001 * (row.timed + 1)))
                for row in model.objects.all()}
    return (
        rows(JobHourCounts, lambda row: (row.job_id, row.hour)),
        rows(HourCounts, lambda row: row.hour),
        {recent.job_id: [(run, pytest.approx(ended), pytest.approx(seconds, abs=0.002), status)
                         for run, ended, seconds, status in recent.points] for recent in RecentRuns.objects.all()},
    )


@pytest.mark.django_db
def test_the_ends_of_a_deleted_job_still_count_for_every_job():
    job = make_job()
    lifecycle.record_success(claimed(job).pk, 1)
    job.delete()

    assert lifecycle.fold_ends() == 1
    assert counted(HourCounts.objects.all())["succeeded"] == 1
    assert not JobHourCounts.objects.exists() and not RecentRuns.objects.exists()


@pytest.mark.django_db
def test_a_job_keeps_its_last_hundred_durations_oldest_first():
    job = make_job()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    RunEnd.objects.bulk_create([RunEnd(run_id=i, job_id=job.pk, status=RunStatus.SUCCEEDED,
                                       ended_at=start + timedelta(minutes=i), seconds=i) for i in range(1, 106)])
    assert lifecycle.fold_ends(batch=40, seconds=UNBOUNDED) == 105

    points = RecentRuns.objects.get(job=job).points
    assert [run for run, _ended, _seconds, _status in points] == list(range(6, 106))
    assert points[0][1:3] == [(start + timedelta(minutes=6)).timestamp(), 6]
    # each hour of the job holds the runs that ended in it
    assert [row.succeeded for row in JobHourCounts.objects.filter(job=job).order_by("hour")] == [59, 46]


def test_the_leader_folds_what_the_workers_end_and_the_overview_shows_it(processes):
    job = make_job("noop-now")
    staff = User.objects.create_user("ops", is_staff=True)
    processes.worker()
    processes.beat()
    runs = [lifecycle.create_run(job) for _ in range(3)]
    client = Client()
    client.force_login(staff)

    def succeeded_on_the_overview():
        counts = dict(client.get("/").context["counts"])
        return counts["succeeded"] == 3 and counts["queued"] == 0 and counts["running"] == 0
    wait_for(succeeded_on_the_overview, timeout=40, message="the overview to count three succeeded runs")
    assert set(JobRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)) == {"succeeded"}
    assert counted(JobHourCounts.objects.filter(job=job))["succeeded"] == 3
    assert len(RecentRuns.objects.get(job=job).points) == 3
