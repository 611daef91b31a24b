"""The leader's passes over unfinished runs rest in proportion to their time in the database
(jobs.scheduling.pacing): a backlog of queued runs, which each pass reads, cannot take the leader's time
from dispatching, and a broker that is down cannot make them rest."""

import logging
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.execution import publishing
from jobs.models import AttemptOutcome, Job, JobAttempt, JobRun, RunStatus
from jobs.scheduling import pacing
from jobs.scheduling.scheduler import JobScheduler
from scheduler_site.celery import app

from .cli_support import free_port
from .conftest import kombu_lists, wait_for

pytestmark = pytest.mark.django_db  # a pass's cost is its statements' time: each test's pass sends one


class Clock:
    """The test's own clock: a pass's statement moves it on by what the statement costs."""

    def __init__(self):
        self.seconds = 1000.0

    def __call__(self):
        return self.seconds


def statement(clock, seconds, error=None):
    """One statement that takes ``seconds`` on the test's clock (then raises ``error``, if given)."""
    def slow(execute, sql, params, many, context):
        clock.seconds += seconds
        if error is not None:
            raise error
        return execute(sql, params, many, context)

    with connection.execute_wrapper(slow), connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def one_pass(pace, clock, in_database, elsewhere=0.0):
    """A pass: ``in_database`` seconds in its statement, ``elsewhere`` seconds outside any (the broker's)."""
    with pace.timed():
        statement(clock, in_database)
        clock.seconds += elsewhere


def test_a_cheap_pass_runs_once_per_interval():
    clock = Clock()
    pace = pacing.Pace("lost-run check", interval=1.0, clock=clock)
    assert pace.due()
    started = clock.seconds

    one_pass(pace, clock, 0.004)

    assert not pace.due(started + 0.999)
    assert pace.due(started + 1.0)


def test_a_costly_pass_rests_rest_times_as_long_as_it_took():
    clock = Clock()
    pace = pacing.Pace("lost-run check", interval=1.0, clock=clock)

    one_pass(pace, clock, 0.5)  # a backlog read: every queued run
    ended = clock.seconds

    assert pace.took == 0.5
    assert not pace.due(ended + 0.5 * pacing.REST - 0.01)
    assert pace.due(ended + 0.5 * pacing.REST)
    # Its share of the leader's time, pass and rest together:
    assert 0.5 / (0.5 + 0.5 * pacing.REST) <= 0.025


def test_a_failing_pass_rests_too_and_its_error_is_raised(caplog):
    clock = Clock()
    pace = pacing.Pace("monitor pass", interval=5.0, clock=clock)

    with caplog.at_level(logging.WARNING, logger="jobs.scheduling.pacing"), pytest.raises(ConnectionError), \
            pace.timed():
        statement(clock, 2.0, error=ConnectionError("the database went away"))

    assert not pace.due(clock.seconds + 79)
    assert pace.due(clock.seconds + 80)
    assert "the monitor pass took 2.00 s in the database" in caplog.text
    assert "runs again in 80 s, not 5 s" in caplog.text


def test_time_waiting_on_the_broker_does_not_count(caplog):
    # With the broker down, a look at a queue's depth waits 2 s for a connection refused twice.
    clock = Clock()
    pace = pacing.Pace("monitor pass", interval=5.0, clock=clock)
    started = clock.seconds

    with caplog.at_level(logging.WARNING, logger="jobs.scheduling.pacing"):
        one_pass(pace, clock, 0.003, elsewhere=2.0)

    assert pace.took == pytest.approx(0.003)
    assert not pace.due(started + 4.99)
    assert pace.due(started + 5.0)  # once an interval, as if the broker had answered at once
    assert caplog.text == ""


def test_a_pass_held_up_once_rests_as_the_one_before_it_and_a_backlog_read_twice_rests_in_full(caplog):
    clock = Clock()
    pace = pacing.Pace("lost-run check", interval=1.0, clock=clock)
    one_pass(pace, clock, 0.004)
    clock.seconds = pace.next_at

    one_pass(pace, clock, 3.0)  # a statement waited 3 s for a lock, or for the database to come back

    assert pace.took == 3.0 and pace.cost == pytest.approx(0.004)
    assert pace.due(clock.seconds + 0.17)  # 40 times 0.004 s on, not 120 s
    assert pace.may_run(clock.seconds + 0.17, lambda: 60)  # nothing falls due for a minute
    assert not pace.may_run(clock.seconds + 0.17, lambda: 5)  # it lasted 3 s: not just before a slot
    clock.seconds = pace.next_at

    with caplog.at_level(logging.WARNING, logger="jobs.scheduling.pacing"):
        one_pass(pace, clock, 3.0)  # slow again: a backlog, every pass reads it
    assert not pace.due(clock.seconds + 3.0 * pacing.REST - 0.01)
    assert pace.due(clock.seconds + 3.0 * pacing.REST)
    assert "the lost-run check took 3.00 s in the database, and 3.00 s the time before" in caplog.text


def test_a_pass_that_rests_a_little_longer_than_its_interval_says_nothing(caplog):
    clock = Clock()
    pace = pacing.Pace("lost-run check", interval=1.0, clock=clock)

    with caplog.at_level(logging.WARNING, logger="jobs.scheduling.pacing"):
        one_pass(pace, clock, 0.05)  # rests 2 s: a second late at most, not worth a warning

    assert caplog.text == ""
    assert not pace.due(clock.seconds + 1.99)


def test_a_slow_pass_waits_while_a_slot_falls_due_before_it_would_end_but_not_for_ever():
    clock = Clock()
    pace = pacing.Pace("lost-run check", interval=1.0, clock=clock)
    one_pass(pace, clock, 0.3)
    asked = []

    def until_due(seconds):
        return lambda: asked.append(seconds) or seconds

    due_at = pace.next_at
    assert not pace.may_run(due_at - 0.01, until_due(60))
    assert asked == []  # not due: the scheduler is not asked
    assert not pace.may_run(due_at, until_due(0.5))  # the pass would end 0.3 s in, too close to a slot 0.5 s away
    assert pace.may_run(due_at, until_due(0.7))
    assert not pace.may_run(due_at + 9.9, until_due(0.1))
    assert pace.may_run(due_at + 10.0, until_due(0.1))  # POSTPONE_INTERVALS intervals: it runs anyway
    assert asked == [0.5, 0.7, 0.1]


def test_a_pass_that_waited_on_the_broker_waits_while_a_slot_falls_due_though_it_rests_no_longer():
    clock = Clock()
    pace = pacing.Pace("monitor pass", interval=5.0, clock=clock)
    one_pass(pace, clock, 0.01, elsewhere=0.5)  # 1,000 messages published again: the tick is held that long

    assert pace.due(clock.seconds + 4.5)  # rests for its 0.01 s in the database: once an interval
    assert not pace.may_run(clock.seconds + 4.5, lambda: 0.8)  # would end 0.5 s in, too close to a slot
    assert pace.may_run(clock.seconds + 4.5, lambda: 1.2)


def test_a_quick_pass_does_not_ask_what_falls_due():
    clock = Clock()
    pace = pacing.Pace("monitor pass", interval=5.0, clock=clock)
    one_pass(pace, clock, 0.002)

    assert pace.may_run(pace.next_at, lambda: pytest.fail("a quick pass holds up nothing"))


@pytest.mark.django_db(transaction=True)
def test_the_leader_looks_for_lost_runs_when_the_check_is_due_and_clear_of_a_slot(settings):
    settings.JOBS_SLOT_CHECK_SECONDS = 0
    # No lost budget: the lost run ends there, and no message of a rerun is left in the broker.
    job = save_job(Job(name="silent-worker", kind="callable", target="builtin.noop", queue="nobody-listens",
                       max_lost_attempts=0), {"type": "manual"})
    long_ago = timezone.now() - timedelta(minutes=10)
    run = JobRun.objects.create(job=job, status=RunStatus.RUNNING, attempt=1, scheduled_for=long_ago,
                                created_at=long_ago, queued_at=long_ago, started_at=long_ago,
                                heartbeat_at=long_ago, worker="gone@host")
    attempt = JobAttempt.objects.create(run=run, number=1, task_id="claimed", worker="gone@host", started_at=long_ago,
                                        heartbeat_at=long_ago)
    soon = save_job(Job(name="due-soon", kind="callable", target="builtin.noop", queue="nobody-listens"),
                    {"type": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"})  # not due in the test: nothing is sent
    scheduler = JobScheduler(app=app, lazy=True)
    try:
        scheduler.tick()  # takes the lease; the database has been reachable for no time yet
        scheduler._database_since -= 3600  # as if reachable for an hour: silence now means a lost worker
        scheduler._lost_check.next_at = float("inf")  # the last check was costly: it rests
        scheduler._next_housekeeping = 0.0
        scheduler.tick()
        assert JobRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
        assert JobAttempt.objects.get(pk=attempt.pk).outcome == AttemptOutcome.RUNNING

        # Due, but its last pass took a second and a slot falls due in one: it waits, not to hold the slot up.
        Job.objects.filter(pk=soon.pk).update(next_run_at=timezone.now() + timedelta(seconds=1))
        scheduler._lost_check.took = scheduler._lost_check.cost = scheduler._lost_check.lasted = 1.0
        scheduler._lost_check.next_at = time.monotonic()
        scheduler._next_housekeeping = 0.0
        scheduler.tick()
        assert JobAttempt.objects.get(pk=attempt.pk).outcome == AttemptOutcome.RUNNING
        Job.objects.filter(pk=soon.pk).update(next_run_at=timezone.now() + timedelta(days=1))

        scheduler._lost_check.next_at = time.monotonic() - 10 * scheduler._lost_check.interval  # waited enough
        scheduler._next_housekeeping = 0.0
        scheduler.tick()
        attempt.refresh_from_db()
        assert attempt.outcome == AttemptOutcome.LOST
        assert attempt.error.startswith("Lost: no heartbeat from gone@host for 6")
        assert JobRun.objects.get(pk=run.pk).status == RunStatus.LOST
        assert scheduler._lost_check.next_at > 0.0
    finally:
        scheduler.leadership.release()


@pytest.mark.django_db(transaction=True)
def test_a_run_waits_no_longer_for_its_message_after_the_monitor_met_a_broker_that_was_down(settings,
                                                                                           redis_client):
    settings.JOBS_SLOT_CHECK_SECONDS = 0
    settings.JOBS_MONITOR_SECONDS = 1.0
    queue = "pacing-broker-down"
    job = save_job(Job(name="message-lost", kind="callable", target="builtin.noop", queue=queue), {"type": "manual"})
    # Queued ten minutes ago and still not claimed: its message went with the broker, to be published again.
    long_ago = timezone.now() - timedelta(minutes=10)
    run = JobRun.objects.create(job=job, status=RunStatus.QUEUED, attempt=1, scheduled_for=long_ago,
                                created_at=long_ago, queued_at=long_ago)
    broker_url = app.conf.broker_url

    def waiting():
        return sum(redis_client.llen(key) for key in kombu_lists(queue))

    scheduler = JobScheduler(app=app, lazy=True)
    try:
        scheduler.tick()  # takes the lease; the database has been reachable for no time yet
        scheduler._database_since -= 3600  # as if reachable for an hour: the run has waited long
        app.conf.broker_url = f"redis://127.0.0.1:{free_port(19500)}/0"  # nothing listens there: the broker is down
        publishing.forget()
        scheduler._monitor.next_at = 0.0
        began = time.monotonic()
        scheduler.tick()
        assert time.monotonic() - began >= 2.0, "the monitor's pass did not wait on the broker"
        assert waiting() == 0

        app.conf.broker_url = broker_url  # the broker is back
        publishing.forget()
        back = time.monotonic()

        def published():
            scheduler.tick()
            return waiting()

        # Within two monitor intervals on the test's clock (it rested 80 s when the broker's wait counted).
        wait_for(published, timeout=2 * settings.JOBS_MONITOR_SECONDS + 1, interval=0.1,
                 message="the run's message published again")
        assert time.monotonic() - back <= 2 * settings.JOBS_MONITOR_SECONDS + 1
        assert JobRun.objects.get(pk=run.pk).status == RunStatus.QUEUED  # published, nobody listens there
    finally:
        app.conf.broker_url = broker_url
        publishing.forget()
        scheduler.leadership.release()
