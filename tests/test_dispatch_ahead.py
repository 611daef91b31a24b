"""Dispatching ahead of the slot (JOBS_DISPATCH_AHEAD_SECONDS): a run is created a few seconds before
its slot, queued for it, and its message sent at the slot, never before (jobs.lifecycle.ahead); jobs
whose slot depends on the runs active at the slot are left to the slot itself, a job paused in
between does not run, and a leader that dies with messages held leaves them to the next. Only a slot
that JOBS_DISPATCH_AHEAD_MIN_JOBS jobs share goes ahead; most tests here set that minimum to 1."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import pause, save_job
from jobs.execution import publishing
from jobs.lifecycle import ahead
from jobs.models import Job, JobRun, RunStatus
from jobs.models.window import window_book
from jobs.scheduling import dispatch, monitor

from .conftest import wait_for

AHEAD = 10
EVERY_SLOT_AHEAD = override_settings(JOBS_DISPATCH_AHEAD_SECONDS=AHEAD, JOBS_DISPATCH_AHEAD_MIN_JOBS=1)


def interval_job(name, every=60, **fields):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", **fields),
                    {"type": "interval", "every_seconds": every})


def cron_job(name, cron="* * * * *", zone="Europe/Berlin", **fields):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", **fields),
                    {"type": "cron", "cron": cron, "timezone": zone})


def due_in(job, seconds, now=None):
    slot = (now or timezone.now()).replace(microsecond=0) + timedelta(seconds=seconds)
    Job.objects.filter(pk=job.pk).update(next_run_at=slot)
    job.refresh_from_db()
    return slot


def waiting_in_broker():
    queue = settings.JOBS_DEFAULT_QUEUE
    return publishing.queue_depth([queue])[queue]


def dispatch_ahead(now, capture):
    with capture(execute=True):  # the messages are held once the runs are committed
        return dispatch.dispatch_due(now=now)


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_a_run_is_created_ahead_of_its_slot_and_sent_at_it(redis_client, django_capture_on_commit_callbacks):
    job = interval_job("soon")
    slot = due_in(job, 5)

    assert dispatch_ahead(timezone.now(), django_capture_on_commit_callbacks).runs_ahead == 1

    run = job.runs.get()
    assert (run.status, run.scheduled_for, run.queued_at, run.next_attempt_at, run.reason) == (
        RunStatus.QUEUED, slot, slot, None, "")
    job.refresh_from_db()
    assert job.next_run_at == slot + timedelta(seconds=60)
    assert waiting_in_broker() == 0

    assert ahead.publish_due(slot - timedelta(milliseconds=1)) == 0
    assert waiting_in_broker() == 0
    assert ahead.publish_due(slot) == 1
    assert waiting_in_broker() == 1
    assert ahead.publish_due(slot + timedelta(seconds=1)) == 0  # sent once
    assert waiting_in_broker() == 1


@pytest.mark.django_db(transaction=True)
@EVERY_SLOT_AHEAD
def test_a_crowded_slots_runs_are_sent_whole_at_the_slot(redis_client, django_capture_on_commit_callbacks):
    jobs = [interval_job(f"burst-{i}", bundle="never") for i in range(5)]  # a message a run, to count them
    now = timezone.now()  # one reading: a second crossed between two readings would split the slot
    slots = [due_in(job, 5, now) for job in jobs]
    dispatch_ahead(timezone.now(), django_capture_on_commit_callbacks)

    assert ahead.publish_due(slots[0]) == 5

    assert sorted(job.runs.get().status for job in jobs) == [RunStatus.QUEUED] * 5
    assert waiting_in_broker() == 5


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_only_slots_within_the_window_go_ahead(redis_client):
    # One clock for the slots and the tick: with the tick's own reading, a second boundary crossed in
    # between (under load, one run in ten or so) made the window hold an eleventh slot.
    now = timezone.now()
    later = interval_job("later")
    due_in(later, AHEAD + 5, now=now)
    every_second = interval_job("soon", every=1)
    first = due_in(every_second, 1, now=now)

    dispatch.dispatch_due(now=now)

    assert not later.runs.exists()
    slots = list(every_second.runs.values_list("scheduled_for", flat=True).order_by("scheduled_for"))
    # The slots in (now, now + AHEAD]: the first whole second after now, and the AHEAD - 1 after it.
    assert slots == [first + timedelta(seconds=i) for i in range(AHEAD)]
    assert set(every_second.runs.values_list("status", flat=True)) == {RunStatus.QUEUED}


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
@pytest.mark.parametrize("fields", [{"overlap_policy": "skip"}, {"jitter_seconds": 5}], ids=["skip", "jittery"])
def test_a_job_whose_slot_depends_on_the_moment_waits_for_its_slot(fields, redis_client):
    job = interval_job("depends", **fields)
    slot = due_in(job, 5)

    dispatch.dispatch_due(now=timezone.now())

    assert not job.runs.exists()
    job.refresh_from_db()
    assert job.next_run_at == slot
    dispatch.dispatch_due(now=slot)
    assert job.runs.filter(scheduled_for=slot).exists()


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_a_job_paused_before_the_slot_does_not_run(redis_client, django_capture_on_commit_callbacks):
    job = interval_job("paused")
    slot = due_in(job, 5)
    dispatch_ahead(timezone.now(), django_capture_on_commit_callbacks)

    pause(job)

    assert ahead.publish_due(slot) == 0
    run = job.runs.get()
    assert (run.status, run.reason) == (RunStatus.SKIPPED, lifecycle.runs.PAUSED_BEFORE_START)
    assert waiting_in_broker() == 0


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_the_scheduler_wakes_for_the_window_and_for_a_held_slot(redis_client, django_capture_on_commit_callbacks):
    job = interval_job("later")
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(next_run_at=now + timedelta(seconds=30))
    Job.objects.exclude(pk=job.pk).update(next_run_at=None)

    assert dispatch.seconds_until_next_due(now=now) == pytest.approx(30 - AHEAD)

    Job.objects.filter(pk=job.pk).update(next_run_at=now + timedelta(seconds=3))
    dispatch_ahead(now, django_capture_on_commit_callbacks)
    assert dispatch.seconds_until_next_due(now=now) == pytest.approx(3)


def test_beat_dispatching_ahead_never_starts_a_run_before_its_slot(processes, ledger):
    job = save_job(Job(name="ahead-e2e", kind="callable", target="test.ledger", kwargs={"path": ledger.path}),
                   {"type": "interval", "every_seconds": 2})
    processes.worker()
    processes.beat(JOBS_DISPATCH_AHEAD_SECONDS="5", JOBS_DISPATCH_AHEAD_MIN_JOBS="1")

    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 4, timeout=40,
             message="four succeeded runs")
    pause(job)
    runs = list(job.runs.filter(status=RunStatus.SUCCEEDED).order_by("scheduled_for"))
    started = {key: float(at) for _, key, at in ledger.lines("start")}
    for run in runs:
        assert started[f"{run.pk}:1"] >= run.scheduled_for.timestamp(), f"run {run.pk} started before its slot"
    slots = [run.scheduled_for for run in job.runs.order_by("scheduled_for")]
    assert len(slots) == len(set(slots))
    assert {(b - a).total_seconds() for a, b in zip(slots, slots[1:], strict=False)} == {2.0}


@pytest.mark.django_db
@override_settings(JOBS_DISPATCH_AHEAD_SECONDS=AHEAD, JOBS_DISPATCH_AHEAD_MIN_JOBS=3, JOBS_DISPATCH_BATCH=2)
def test_only_a_slot_many_jobs_share_goes_ahead_and_stays_ahead_while_its_batches_are_made(
        redis_client, django_capture_on_commit_callbacks):
    crowd = [interval_job(f"crowd-{i}") for i in range(3)]
    pair = [interval_job(f"pair-{i}") for i in range(2)]
    now = timezone.now()  # the slots are set from it: a slow machine cannot make them due meanwhile
    crowded_slot = [due_in(job, 5, now) for job in crowd][0]
    quiet_slot = [due_in(job, 7, now) for job in pair][0]

    first = dispatch_ahead(now, django_capture_on_commit_callbacks)
    # One of the crowd left: with the two held, still three.
    second = dispatch_ahead(now, django_capture_on_commit_callbacks)

    assert (first.runs_ahead, second.runs_ahead) == (2, 1)
    assert [list(job.runs.values_list("status", "scheduled_for")) for job in crowd] == [
        [(RunStatus.QUEUED, crowded_slot)]] * 3
    assert not any(job.runs.exists() for job in pair)
    assert dispatch.dispatch_due(now=quiet_slot).runs_created == 2


@pytest.mark.django_db
def test_by_default_a_slot_of_a_few_jobs_is_dispatched_at_the_slot(redis_client):
    assert (settings.JOBS_DISPATCH_AHEAD_SECONDS, settings.JOBS_DISPATCH_AHEAD_MIN_JOBS) == (10, 1000)
    job = interval_job("alone")
    slot = due_in(job, 5)

    assert dispatch.dispatch_due(now=timezone.now()).due_jobs == 0
    assert dispatch.seconds_until_next_due(now=slot - timedelta(seconds=5)) == pytest.approx(5)
    assert dispatch.dispatch_due(now=slot).runs_created == 1


@pytest.mark.django_db
@override_settings(JOBS_DISPATCH_AHEAD_SECONDS=AHEAD, JOBS_DISPATCH_AHEAD_MIN_JOBS=2)
def test_the_scheduler_wakes_ahead_of_a_crowded_slot_only(redis_client):
    now = timezone.now()
    Job.objects.update(next_run_at=None)
    alone = interval_job("alone")
    Job.objects.filter(pk=alone.pk).update(next_run_at=now + timedelta(seconds=12))
    crowd = [interval_job(f"crowd-{i}") for i in range(2)]
    Job.objects.filter(pk__in=[job.pk for job in crowd]).update(next_run_at=now + timedelta(seconds=14))

    assert dispatch.seconds_until_next_due(now=now) == pytest.approx(14 - AHEAD)


@pytest.mark.django_db
@override_settings(JOBS_DISPATCH_AHEAD_SECONDS=AHEAD, JOBS_DISPATCH_AHEAD_MIN_JOBS=2)
def test_once_a_crowded_slots_runs_are_made_the_scheduler_sleeps_until_the_slot(
        redis_client, django_capture_on_commit_callbacks):
    Job.objects.update(next_run_at=None)
    crowd = [interval_job(f"crowd-{i}") for i in range(2)]
    now = timezone.now()  # one reading: a second crossed between two readings would split the crowd
    slot = [due_in(job, 5, now) for job in crowd][0]

    assert dispatch_ahead(now, django_capture_on_commit_callbacks).runs_ahead == 2
    # Its messages wait for the slot: nothing more to make for it, so no wake-up before the slot.
    assert dispatch.seconds_until_next_due(now=now) == pytest.approx((slot - now).total_seconds())


def dispatch_queries(count, capture):
    """The statements one tick takes to dispatch ``count`` due jobs (their slots a moment ago)."""
    jobs = [interval_job(f"many-{count}-{i}", spread=30 if i % 2 else 0) if i % 4 < 2 else
            cron_job(f"many-{count}-{i}", spread=30 if i % 2 else 0, dst_skipped="skip") for i in range(count)]
    slot = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(next_run_at=slot)
    window_book.loaded_at = float("-inf")  # each tick reads the maintenance windows (at most once a second)
    with capture() as queries:
        report = dispatch.dispatch_due(now=timezone.now())
    assert report.due_jobs == count
    return len(queries)


@pytest.mark.django_db
def test_a_tick_takes_as_many_statements_for_forty_due_jobs_as_for_four(redis_client):
    # No field a due job's slot needs (its name and spread, for its offset; a cron job's DST policy)
    # is read one job at a time: half the jobs are cron jobs in a zone with DST, half interval jobs.
    few = dispatch_queries(4, lambda: CaptureQueriesContext(connection))
    Job.objects.all().delete()
    many = dispatch_queries(40, lambda: CaptureQueriesContext(connection))
    assert many == few


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_the_next_leader_sends_what_a_dead_one_held(redis_client, django_capture_on_commit_callbacks):
    soon, passed, old = interval_job("soon"), interval_job("passed"), interval_job("old")
    now = timezone.now()
    slot = due_in(soon, 5, now)
    dispatch_ahead(now, django_capture_on_commit_callbacks)
    for job, seconds_ago in ((passed, 3), (old, settings.JOBS_REPUBLISH_AFTER_SECONDS + 3)):
        # Made ahead by a leader before, their slots passed since.
        earlier = now - timedelta(seconds=seconds_ago)
        lifecycle.create_runs([(job, earlier, RunStatus.QUEUED, "", earlier)], earlier - timedelta(seconds=AHEAD))
    ahead.forget()  # the leader that held their messages died

    assert ahead.adopt(now) == 2  # the run older than JOBS_REPUBLISH_AFTER_SECONDS is the monitor's
    assert waiting_in_broker() == 1  # the run whose slot has passed: at once
    assert ahead.publish_due(slot) == 1
    assert waiting_in_broker() == 2
    assert [job.runs.get().status for job in (soon, passed, old)] == [RunStatus.QUEUED] * 3


@pytest.mark.django_db
@EVERY_SLOT_AHEAD
def test_a_run_held_for_its_slot_is_not_taken_for_a_lost_message(redis_client, django_capture_on_commit_callbacks):
    busy = interval_job("busy", every=3600)
    with django_capture_on_commit_callbacks(execute=True):
        waiting = lifecycle.create_run(busy)  # its message in the broker, no worker to take it
    JobRun.objects.filter(pk=waiting.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    due_in(interval_job("soon"), 5)
    dispatch_ahead(timezone.now(), django_capture_on_commit_callbacks)

    # One message for one queued run whose time has come: nothing to publish again.
    assert waiting_in_broker() == 1
    assert monitor.republish_unclaimed(timezone.now()) == 0
