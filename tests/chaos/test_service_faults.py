"""The broker losing its messages or restarting (on each broker: Redis, Sentinel, RabbitMQ),
PostgreSQL restarting or dropping every connection: the runs the outage caught still end, each
slot due meanwhile runs once, and the processes keep working."""

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import pause
from jobs.execution import publishing
from jobs.models import JobRun, RunStatus, RunTrigger

from ..brokers import BROKERS
from ..conftest import wait_for
from . import invariants
from .conftest import ledger_has, make_job, since, started_attempt

TERMINAL = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
            RunStatus.CANCELLED]


def every_second_job(name, ledger, seconds, **fields):
    return make_job(name, kwargs={"path": ledger.path, "seconds": seconds},
                    schedule={"type": "interval", "every_seconds": 1}, **fields)


def succeeded_after(job, moment, count, timeout):
    done = job.runs.filter(status=RunStatus.SUCCEEDED, scheduled_for__gt=moment)
    wait_for(lambda: done.count() >= count, timeout=timeout, message=f"{count} runs succeeded after the fault")


def pause_and_check(jobs, ledger, terminal_within=60, skipped_reason=None):
    """Pause the interval ``jobs``, check every slot of each due by then on the test's clock, and
    every run of them; (slots expected, slots seen, verdict)."""
    paused_at = timezone.now()
    for job in jobs:
        pause(job)
    expected = seen = 0
    for job in jobs:
        slots = invariants.check_slots(job, paused_at, ledger, skipped_reason=skipped_reason,
                                       terminal_within=terminal_within)
        expected, seen = expected + slots.expected, seen + slots.seen
    return expected, seen, invariants.check(invariants.runs_of(*jobs), ledger, terminal_within=terminal_within)


def in_flight():
    """(runs queued, runs running) now: the premise of a fault 'while runs are queued and running'."""
    return (JobRun.objects.filter(status=RunStatus.QUEUED).count(),
            JobRun.objects.filter(status=RunStatus.RUNNING).count())


def ended_by(moment):
    """Whether every run created before ``moment`` has ended."""
    return not JobRun.objects.filter(created_at__lte=moment).exclude(status__in=TERMINAL).exists()


def waiting(queue="jobs"):
    return publishing.queue_depth([queue])[queue] or 0


# Its own bounds add up to 280 s (40 + 90 + 60 + 90); 150 s cut a loaded CI run off inside one, and the
# session's connection, killed mid-query, failed the tests after it in the same process.
@pytest.mark.timeout(300)
@pytest.mark.brokers(*BROKERS)
def test_it_loses_no_run_when_the_broker_loses_its_messages_with_runs_queued_and_running(processes, ledger,
                                                                                          broker, scoreboard):
    # One worker process, and more work each second than it can do: a backlog of queued messages
    # builds up behind the running one, then every message goes (Redis: FLUSHALL, the unacked index
    # too; RabbitMQ: a purge).
    steady = every_second_job("flush-steady", ledger, 0.2)
    # Its own message each run. In a bundle a run has no start written until it ends or overruns its
    # share (2 s: this one never does), so the wait below sees only slow runs published alone. A new
    # job is short for a minute, and when the two jobs' slots fell in one dispatch for the whole 40 s
    # (a loaded CI run, 2026-11-29), every slow run was in a bundle and the wait timed out.
    slow = every_second_job("flush-slow", ledger, 1.5, bundle="never")
    processes.worker(concurrency=1)
    processes.beat()

    def backlog_behind_a_fresh_slow_run():
        # A slow run that began under half a second ago has a second left: still running when the
        # messages go, whatever the time between this check and the flush.
        # Three runs queued as well as three messages waiting: a message the monitor published again
        # for a run that waited long is a second message of the same run.
        fresh = timezone.now() - timedelta(seconds=0.5)
        return (waiting() >= 3 and in_flight()[0] >= 3
                and slow.runs.filter(status=RunStatus.RUNNING, started_at__gte=fresh).exists())

    wait_for(backlog_behind_a_fresh_slow_run, timeout=40, interval=0.05, message="a backlog behind a run")
    queued, running = in_flight()
    broker.lose_messages("jobs")
    flushed_at, flush_moment = time.monotonic(), timezone.now()
    assert queued >= 3 and running >= 1

    wait_for(lambda: ended_by(flush_moment), timeout=90, message="every run caught by the flush to end")
    recovered = since(flushed_at)
    succeeded_after(steady, flush_moment, 2, timeout=60)

    expected, seen, verdict = pause_and_check([steady, slow], ledger, terminal_within=90)
    assert verdict.duplicates == 0 and verdict.reruns == 0
    scoreboard.record("6 the broker loses its messages, runs queued and running", expected, seen,
                      verdict.duplicates, recovered)


def restart_and_wait_for_runs(broker, job):
    """The broker's fault (Redis: SIGKILL, started again 2 s later, empty; Sentinel: the master
    SIGKILLed, the replica promoted; RabbitMQ: SIGKILL and a restart on its data), then wait for 3
    runs of ``job`` scheduled after that to succeed; the seconds that took."""
    broker.fault()
    restarted_at, restart_moment = time.monotonic(), timezone.now()
    succeeded_after(job, restart_moment, 3, timeout=60)
    return since(restarted_at)


@pytest.mark.timeout(150)
@pytest.mark.brokers(*BROKERS)
def test_it_keeps_consuming_after_the_broker_restarts(processes, ledger, broker, scoreboard):
    job = every_second_job("redis-restart", ledger, 0.5)
    processes.worker(concurrency=2)
    processes.beat()
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30,
             message="two runs before the restart")

    recovered = restart_and_wait_for_runs(broker, job)

    expected, seen, verdict = pause_and_check([job], ledger)
    assert verdict.duplicates == 0
    scoreboard.record("7 restart the broker", expected, seen, verdict.duplicates, recovered)


@pytest.mark.timeout(150)
@pytest.mark.brokers(*BROKERS)
def test_a_worker_survives_the_broker_dying_while_it_runs_a_task(processes, ledger, broker, scoreboard):
    """The worker holds an unacknowledged message when the broker dies: on Redis kombu 5.7.0 ended
    the worker here (scheduler_site/kombu_patches.py); it must live on and consume after the restart."""
    job = every_second_job("redis-dies-mid-run", ledger, 2)
    worker = processes.worker(concurrency=2)
    processes.beat()
    wait_for(lambda: job.runs.filter(status=RunStatus.RUNNING).exists(), timeout=30, message="a run in progress")

    recovered = restart_and_wait_for_runs(broker, job)
    assert worker.poll() is None, "the worker process ended when the broker went away"

    expected, seen, verdict = pause_and_check([job], ledger)
    assert verdict.duplicates == 0
    scoreboard.record("7b the broker dies under a running task", expected, seen, verdict.duplicates, recovered)


@pytest.mark.timeout(120)
def test_it_recovers_when_postgres_drops_every_connection(processes, ledger, scoreboard):
    # Every backend of the test database but our own is terminated while a long run and
    # scheduled runs are in flight (the server itself stays up: see the restart below).
    job = every_second_job("db-drop", ledger, 0.5)
    long_job = make_job("db-drop-long", kwargs={"path": ledger.path, "seconds": 6})
    processes.worker(concurrency=3)
    processes.beat()
    long_run = lifecycle.create_run(long_job)
    started_attempt(long_run)
    wait_for(lambda: ledger_has(ledger, "start", f"{long_run.pk}:1"), message="the long run to start")
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30,
             message="two scheduled runs before the fault")

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [connection.settings_dict["NAME"]])
        terminated = cursor.fetchone()[0]
    assert terminated > 0
    dropped_at, drop_moment = time.monotonic(), timezone.now()
    succeeded_after(job, drop_moment, 3, timeout=60)
    recovered = since(dropped_at)

    expected, seen, verdict = pause_and_check([job], ledger)
    long_verdict = invariants.check(invariants.runs_of(long_job), ledger, terminal_within=30)
    duplicates = verdict.duplicates + long_verdict.duplicates
    scoreboard.record("8 drop all PG connections", expected + 1, seen + long_verdict.succeeded, duplicates,
                      recovered)
    assert duplicates == 0 and long_verdict.reruns == 0


OUTAGE_SECONDS = 15


@pytest.mark.timeout(180)
def test_it_loses_and_repeats_nothing_when_postgres_restarts(private_postgres, processes, ledger, scoreboard):
    # A PostgreSQL cluster of the test's own is stopped (as in a crash: every backend killed at
    # once) for 15 s while a long run, a burst of manual runs and an every-second job are queued
    # and running, then started again. The workers hold on to their claims and outcomes until it
    # is back; the leader gives their heartbeats a whole window before declaring any attempt lost.
    slots = every_second_job("pg-restart-slots", ledger, 0.2)
    long_job = make_job("pg-restart-long", kwargs={"path": ledger.path, "seconds": 6})
    burst = make_job("pg-restart-burst", kwargs={"path": ledger.path, "seconds": 1})
    processes.worker(concurrency=3)
    processes.beat()
    wait_for(lambda: slots.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=40,
             message="two scheduled runs before the outage")
    long_run = lifecycle.create_run(long_job)
    wait_for(lambda: ledger_has(ledger, "start", f"{long_run.pk}:1"), message="the long run to start")
    burst_runs = [lifecycle.create_run(burst) for _ in range(6)]
    wait_for(lambda: ledger_has(ledger, "start", f"{burst_runs[0].pk}:1"), message="the burst to start")

    queued, running = in_flight()
    private_postgres.stop(mode="immediate")
    time.sleep(OUTAGE_SECONDS)
    private_postgres.start()
    restarted_at, restart_moment = time.monotonic(), timezone.now()
    connection.close()  # this process's connection died with the server
    assert queued >= 1 and running >= 2

    due_by_restart = len(invariants.clock_slots(slots, restart_moment - invariants.DISPATCH_MARGIN))
    manual = [long_run.pk] + [run.pk for run in burst_runs]

    def recovered_everything():
        ended_slots = slots.runs.filter(trigger=RunTrigger.SCHEDULE, status__in=TERMINAL,
                                        scheduled_for__lte=restart_moment - invariants.DISPATCH_MARGIN).count()
        return ended_slots >= due_by_restart and JobRun.objects.filter(pk__in=manual, status__in=TERMINAL).count() \
            == len(manual)

    wait_for(recovered_everything, timeout=90, message="every run and every slot due by the restart to end")
    recovered = since(restarted_at)
    succeeded_after(slots, restart_moment + timedelta(seconds=1), 2, timeout=60)

    expected, seen, slot_verdict = pause_and_check([slots], ledger, skipped_reason="missed:")
    manual_verdict = invariants.check(invariants.runs_of(long_job, burst), ledger, terminal_within=30)
    duplicates = slot_verdict.duplicates + manual_verdict.duplicates
    reruns = slot_verdict.reruns + manual_verdict.reruns
    assert manual_verdict.succeeded == len(manual)
    assert not JobRun.objects.filter(attempts__outcome="lost").exists(), "an attempt was declared lost"
    scoreboard.record(f"8b restart PostgreSQL ({OUTAGE_SECONDS} s down), runs queued and running",
                      expected + len(manual), seen + manual_verdict.succeeded, duplicates, recovered)
    assert duplicates == 0 and reruns == 0


@pytest.fixture
def lazy_wal_postgres(transactional_db):
    """A private PostgreSQL whose WAL writer waits 10 s between rounds: a commit that does not wait
    for its flush (the claim's) stays in the server's memory, and a crash loses it."""
    from .conftest import private_postgres_bindir, serving_the_test_database
    from .servers import PrivatePostgres

    server = PrivatePostgres(private_postgres_bindir(), settings={"wal_writer_delay": "10s"})
    with serving_the_test_database(server):
        yield server


@pytest.mark.timeout(120)
def test_a_claim_a_postgres_crash_loses_is_taken_back_and_the_job_runs_once(lazy_wal_postgres, processes, ledger,
                                                                            scoreboard):
    # The claim commits without waiting for its flush, so a crash of the database just after it
    # loses it: the run is queued again, while its job runs on. The attempt takes its claim back
    # when its heartbeat or its outcome finds that, and the job is not run a second time. (No
    # beat writes meanwhile: its heartbeat, every 5 s here, would flush the claim with it.)
    job = make_job("claim-lost-in-crash", kwargs={"path": ledger.path, "seconds": 4})
    worker = processes.worker(concurrency=1, JOBS_HEARTBEAT_SECONDS=5)
    run = lifecycle.create_run(job)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), interval=0.02, message="the run to start")
    lazy_wal_postgres.stop(mode="immediate")
    crashed_at = time.monotonic()
    time.sleep(2)
    lazy_wal_postgres.start()
    connection.close()  # this process's connection died with the server

    wait_for(lambda: JobRun.objects.get(pk=run.pk).status in TERMINAL, timeout=60, message="the run to end")
    recovered = since(crashed_at)
    run.refresh_from_db()
    attempts = list(run.attempts.values_list("number", "outcome"))
    starts = [row for row in ledger.lines("start") if row[1] == f"{run.pk}:1"]
    restored = "its claim was lost" in Path(worker.log_path).read_text(errors="replace")
    print(f"the crash lost the claim and the worker took it back: {restored}")
    scoreboard.record("8c PostgreSQL crash just after a claim", 1, int(run.status == RunStatus.SUCCEEDED),
                      len(starts) - 1, recovered)
    assert (run.status, attempts) == (RunStatus.SUCCEEDED, [(1, "succeeded")]), processes.logs()
    assert len(starts) == 1
    assert worker.poll() is None
