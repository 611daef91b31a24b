"""A transactional function job (``@job_function(transactional=True)``) commits its rows with its run's
success, or not at all: a failure, a timeout, or an outcome refused because the attempt was declared
lost or cancelled meanwhile takes its writes back with it. (The SIGKILLs are tests/chaos/test_exactly_once.py.)"""

import contextlib
import threading
from types import SimpleNamespace

import pytest
from django.db import connection

from jobs import kinds, lifecycle
from jobs.kinds.callable import registry
from jobs.models import AttemptOutcome, RunStatus

from .conftest import wait_for
from .test_notifications_support import make_job

TABLE = "exactly_once_unit_rows"
# A second connection writing while the job's transaction is open: the SQLite test database is one
# in-memory shared cache, where the second writer is refused at once rather than waiting.
CONCURRENT = pytest.mark.postgres("a second connection writes while the job's transaction is open")


@contextlib.contextmanager
def rows_table_named(table):
    """A table of (run_id, attempt) rows, which the jobs insert into, dropped after the block."""
    key = "bigserial PRIMARY KEY" if connection.vendor == "postgresql" else "INTEGER PRIMARY KEY AUTOINCREMENT"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"CREATE TABLE {table} (id {key}, run_id bigint NOT NULL, attempt int NOT NULL)")
    yield table
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture
def rows_table(transactional_db):
    with rows_table_named(TABLE) as table:
        yield table


def rows(table=TABLE):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT run_id, attempt FROM {table} ORDER BY id")
        return [tuple(row) for row in cursor.fetchall()]


def insert(run, attempt=1):
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} (run_id, attempt) VALUES (%s, %s)", [run.pk, attempt])
    return SimpleNamespace(output="inserted\n", output_bytes=9, result={"rows": 1})


def claimed_run(job):
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, 1, "w1@host", 4321) is not None
    return run


def in_another_thread(action):
    """``action()`` on a connection of its own, committed before this returns (as the monitor, or a
    person cancelling from the API, would)."""
    done = []

    def act():
        try:
            done.append(action())
        finally:
            connection.close()

    thread = threading.Thread(target=act)
    thread.start()
    thread.join(timeout=30)
    assert done, "the other connection's action did not finish"
    return done[0]


def test_the_decorator_marks_a_function_transactional():
    assert registry.is_transactional("test.insert_row_once")
    assert not registry.is_transactional("test.insert_row")
    assert not registry.is_transactional("builtin.noop")
    assert not registry.is_transactional("no.such.function")
    spec = kinds.get("callable")
    assert spec.transactional(SimpleNamespace(target="test.insert_row_once"))
    assert not kinds.get("command").transactional(SimpleNamespace(target="echo hi"))


@pytest.mark.django_db(transaction=True)
def test_the_rows_and_the_success_commit_together(redis_client, rows_table):
    run = claimed_run(make_job())
    outcome = lifecycle.succeed_in_one_transaction(run.pk, 1, lambda: insert(run))
    run.refresh_from_db()
    assert (outcome.result, run.status, run.output, run.result) == ({"rows": 1}, RunStatus.SUCCEEDED, "inserted\n",
                                                                     {"rows": 1})
    assert run.attempts.get().outcome == AttemptOutcome.SUCCEEDED
    assert rows() == [(run.pk, 1)]


@pytest.mark.django_db(transaction=True)
def test_a_failing_job_leaves_no_row(redis_client, rows_table):
    run = claimed_run(make_job())

    def fails():
        insert(run)
        raise RuntimeError("after the insert")

    with pytest.raises(RuntimeError):
        lifecycle.succeed_in_one_transaction(run.pk, 1, fails)
    assert rows() == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # the caller (the worker) records the failure next
    assert lifecycle.record_failure(run.pk, 1, "RuntimeError: after the insert") == RunStatus.FAILED


@pytest.mark.django_db(transaction=True)
@CONCURRENT
def test_an_attempt_declared_lost_meanwhile_has_its_outcome_and_its_rows_refused(redis_client, rows_table):
    run = claimed_run(make_job())

    def declared_lost_while_it_ran():
        # The monitor declares the attempt lost (no heartbeat) and queues the run's next attempt.
        assert in_another_thread(lambda: lifecycle.record_failure(run.pk, 1, "Lost: no heartbeat", lost=True)) == (
            RunStatus.QUEUED)
        return insert(run)

    with pytest.raises(lifecycle.OutcomeRefused):
        lifecycle.succeed_in_one_transaction(run.pk, 1, declared_lost_while_it_ran)
    assert rows() == []
    run.refresh_from_db()
    assert (run.status, run.attempt) == (RunStatus.QUEUED, 2)  # the rerun starts from a clean slate

    assert lifecycle.claim(run.pk, 2, "w2@host", 4322) is not None
    lifecycle.succeed_in_one_transaction(run.pk, 2, lambda: insert(run, 2))
    assert rows() == [(run.pk, 2)]


@pytest.mark.django_db(transaction=True)
@CONCURRENT
def test_a_run_cancelled_meanwhile_keeps_no_row(redis_client, rows_table):
    run = claimed_run(make_job())

    def cancelled_while_it_ran():
        assert in_another_thread(lambda: lifecycle.cancel(run, reason="by a person"))
        return insert(run)

    with pytest.raises(lifecycle.OutcomeRefused):
        lifecycle.succeed_in_one_transaction(run.pk, 1, cancelled_while_it_ran)
    assert rows() == []
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


# --- with a real worker (PostgreSQL)


def ended(run):
    run.refresh_from_db()
    return run.is_terminal


@pytest.mark.timeout(90)
def test_on_a_worker_a_failure_or_a_timeout_takes_the_rows_back_and_a_success_keeps_one(processes, ledger,
                                                                                         rows_table):
    fails = make_job("fails-after-insert", target="test.insert_row_then_fail",
                     kwargs={"table": rows_table, "path": ledger.path})
    times_out = make_job("times-out-after-insert", target="test.insert_row_once", timeout_seconds=1,
                         kwargs={"table": rows_table, "path": ledger.path, "seconds": 5})
    succeeds = make_job("succeeds", target="test.insert_row_once",
                        kwargs={"table": rows_table, "path": ledger.path, "seconds": 0})
    processes.worker()
    failed, timed_out, succeeded = (lifecycle.create_run(job) for job in (fails, times_out, succeeds))
    for run in (failed, timed_out, succeeded):
        wait_for(lambda run=run: ended(run), timeout=40, message=f"run {run.pk} to end")

    assert (failed.status, timed_out.status, succeeded.status) == (RunStatus.FAILED, RunStatus.TIMED_OUT,
                                                                   RunStatus.SUCCEEDED)
    assert "failing after the insert on purpose" in failed.error
    # Each inserted its row (the ledger says so after the insert); only the success's stayed.
    assert {row[1] for row in ledger.lines("start")} == {f"{run.pk}:1" for run in (failed, timed_out, succeeded)}
    assert rows() == [(succeeded.pk, 1)]
