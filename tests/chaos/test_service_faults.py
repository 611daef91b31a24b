"""Redis losing its messages or restarting, PostgreSQL dropping every connection: the runs the
outage caught still end, and the processes keep working afterwards."""

import time

import pytest
from django.db import connection

from jobs import runs
from jobs.definitions import pause
from jobs.models import RunStatus

from ..conftest import wait_for
from . import invariants
from .conftest import ledger_has, make_job, since, started_attempt


def succeeded_after(job, moment, count, timeout):
    done = job.runs.filter(status=RunStatus.SUCCEEDED, scheduled_for__gt=moment)
    wait_for(lambda: done.count() >= count, timeout=timeout, message=f"{count} runs succeeded after the fault")


def pause_and_check(job, ledger, terminal_within=40):
    pause(job)
    slots = list(job.runs.order_by("scheduled_for").values_list("scheduled_for", flat=True))
    slot_count = invariants.check_slots(job, slots[0], slots[-1])
    return slot_count, invariants.check(invariants.runs_of(job), ledger, terminal_within=terminal_within)


@pytest.mark.timeout(120)
def test_it_republishes_queued_runs_whose_messages_redis_lost(processes, ledger, redis_client, scoreboard):
    job = make_job("flushed", kwargs={"path": ledger.path})
    for _ in range(50):
        runs.run_now(job)
    assert redis_client.llen("jobs") == 50

    redis_client.flushdb()  # this test's own Redis database: its FLUSHALL
    flushed_at = time.monotonic()
    processes.worker(concurrency=2)
    processes.beat()
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=60)

    assert verdict.succeeded == 50
    assert verdict.duplicates == 0
    scoreboard.record("6 flush Redis, 50 queued", 50, verdict.succeeded, verdict.duplicates, since(flushed_at))


def restart_and_wait_for_runs(private_redis, job):
    """Kill Redis, start it again 2 s later (empty), and wait for 3 runs of ``job`` scheduled after
    that to succeed; the seconds that took."""
    private_redis.kill()
    time.sleep(2)
    private_redis.start()
    restarted_at, restart_moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    succeeded_after(job, restart_moment, 3, timeout=60)
    return since(restarted_at)


@pytest.mark.timeout(120)
def test_it_keeps_consuming_after_redis_restarts(processes, ledger, private_redis, scoreboard):
    job = make_job("redis-restart", kwargs={"path": ledger.path, "seconds": 0.5},
                   schedule={"type": "interval", "every_seconds": 1})
    processes.worker(concurrency=2, REDIS_URL=private_redis.url)
    processes.beat(REDIS_URL=private_redis.url)
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30,
             message="two runs before the restart")

    recovered = restart_and_wait_for_runs(private_redis, job)

    slot_count, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record("7 restart a private Redis", slot_count, verdict.succeeded, verdict.duplicates, recovered)


@pytest.mark.timeout(120)
def test_a_worker_survives_redis_dying_while_it_runs_a_task(processes, ledger, private_redis, scoreboard):
    """The worker holds an unacknowledged message when Redis dies: kombu 5.7.0 ended the worker
    here (scheduler_site/kombu_patches.py); it must live on and consume after the restart."""
    job = make_job("redis-dies-mid-run", kwargs={"path": ledger.path, "seconds": 2},
                   schedule={"type": "interval", "every_seconds": 1})
    worker = processes.worker(concurrency=2, REDIS_URL=private_redis.url)
    processes.beat(REDIS_URL=private_redis.url)
    wait_for(lambda: job.runs.filter(status=RunStatus.RUNNING).exists(), timeout=30, message="a run in progress")

    recovered = restart_and_wait_for_runs(private_redis, job)
    assert worker.poll() is None, "the worker process ended when Redis went away"

    slot_count, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record("7b Redis dies under a running task", slot_count, verdict.succeeded, verdict.duplicates,
                      recovered)


@pytest.mark.timeout(120)
def test_it_recovers_when_postgres_drops_every_connection(processes, ledger, scoreboard):
    # Simulates a PostgreSQL restart without restarting the shared server: every backend of the
    # test database but our own is terminated while a long run and scheduled runs are in flight.
    job = make_job("db-drop", kwargs={"path": ledger.path, "seconds": 0.5},
                   schedule={"type": "interval", "every_seconds": 1})
    long_job = make_job("db-drop-long", kwargs={"path": ledger.path, "seconds": 6}, max_retries=1,
                        retry_backoff_seconds=0.2, retry_jitter=False)
    processes.worker(concurrency=3)
    processes.beat()
    long_run = runs.run_now(long_job)
    started_attempt(long_run)
    wait_for(lambda: ledger_has(ledger, "start", f"{long_run.pk}:1"), message="the long run to start")
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=30,
             message="two scheduled runs before the fault")

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [connection.settings_dict["NAME"]])
        terminated = cursor.fetchone()[0]
    assert terminated > 0
    dropped_at, drop_moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    succeeded_after(job, drop_moment, 3, timeout=60)
    recovered = since(dropped_at)

    slot_count, verdict = pause_and_check(job, ledger)
    long_verdict = invariants.check(invariants.runs_of(long_job), ledger, terminal_within=30)
    duplicates = verdict.duplicates + long_verdict.duplicates
    scoreboard.record("8 drop all PG connections", slot_count + 1,
                      verdict.succeeded + long_verdict.succeeded, duplicates, recovered)
    assert duplicates == 0
