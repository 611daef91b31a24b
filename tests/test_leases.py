"""Leases in PostgreSQL (jobs/coordination/leases.py): one holder at a time on the database clock, and a leader
paused past its lease can never commit a tick."""

import threading
import time
from datetime import timedelta

import pytest
import time_machine
from django.db import connection, connections, transaction
from django.utils import timezone

from jobs import lifecycle
from jobs.coordination import leases
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, Lease, RunStatus
from jobs.operations import tasks as operations_tasks
from jobs.scheduling import dispatch
from jobs.scheduling.leader import Leadership, current_leader

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_holder_at_a_time_each_taking_raising_the_epoch():
    first = leases.take("test-lease", "node-a", ttl=60)
    assert first.epoch == 1
    assert leases.take("test-lease", "node-b", ttl=60) is None
    assert leases.renew(first, ttl=60)

    leases.release(first)
    second = leases.take("test-lease", "node-b", ttl=60)

    assert second.epoch == 2
    assert not leases.renew(first, ttl=60)  # the old holder cannot extend what it lost
    assert leases.state("test-lease")["holder"] == "node-b"


@pytest.mark.postgres("moves the database clock with an interval")
def test_expiry_is_judged_by_the_database_clock_not_the_hosts():
    held = leases.take("test-lease", "node-a", ttl=60)

    with time_machine.travel(timezone.now() + timedelta(hours=2), tick=False):  # this host's clock runs ahead
        assert leases.take("test-lease", "node-b", ttl=60) is None
        assert leases.renew(held, ttl=60)

    # Expired by the database's own clock: the row says so, whatever any host thinks.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_lease SET expires_at = now() - interval '1 second' WHERE name = %s", ["test-lease"])
    assert not leases.renew(held, ttl=60)
    assert leases.take("test-lease", "node-b", ttl=60).epoch == 2


@pytest.mark.postgres("reads pg_stat_activity to see a second connection wait for the row lock")
def test_a_leader_paused_past_its_lease_cannot_commit_its_tick(redis_client):
    job = save_job(Job(name="fenced", kind="callable", target="builtin.noop"),
                   {"type": "interval", "every_seconds": 60})
    slot = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    Job.objects.filter(pk=job.pk).update(next_run_at=slot)
    leader_a = leases.take("test-leader", "node-a", ttl=1)
    outcome, blocker_holds, let_blocker_go = {}, threading.Event(), threading.Event()

    def blocker():
        # Another session inserts the same slot and holds it uncommitted: A's tick waits on it in
        # the middle of its transaction, as a leader paused there would.
        try:
            with transaction.atomic():
                JobRun.objects.create(job_id=job.pk, scheduled_for=slot, status=RunStatus.SKIPPED)
                blocker_holds.set()
                let_blocker_go.wait(30)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        finally:
            connections.close_all()

    def tick_of_a():
        try:
            outcome["report"] = dispatch.dispatch_due(lease=leader_a)
        except leases.LeaseLost as exc:
            outcome["lost"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=blocker), threading.Thread(target=tick_of_a)]
    threads[0].start()
    assert blocker_holds.wait(10)
    threads[1].start()
    wait_for(lambda: waiting_on_a_lock("INSERT INTO jobs_jobrun"), timeout=10, message="A's tick to wait")

    leader_b = wait_for(lambda: leases.take("test-leader", "node-b", ttl=60), timeout=10,
                        message="A's lease to expire and B to take it")
    let_blocker_go.set()
    for thread in threads:
        thread.join(30)

    assert "lost" in outcome and "report" not in outcome
    assert not JobRun.objects.filter(job=job).exists()  # A's run was rolled back with its tick
    assert Job.objects.get(pk=job.pk).next_run_at == slot

    report = dispatch.dispatch_due(lease=leader_b)
    assert report.runs_created == 1
    assert list(JobRun.objects.filter(job=job).values_list("scheduled_for", flat=True)) == [slot]


@pytest.mark.postgres("PostgreSQL ends the session of a leader paused in its tick")
def test_a_leader_paused_with_due_jobs_locked_loses_them_to_the_next_leader(settings):
    # Frozen (SIGSTOP, a stalled host) just after its tick locked the due jobs: the next leader's
    # tick skips locked jobs, so they would not run until the paused one woke.
    settings.JOBS_LEADER_TTL_SECONDS = 1
    job = save_job(Job(name="paused-holder", kind="callable", target="builtin.noop"),
                   {"type": "interval", "every_seconds": 60})
    slot = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    Job.objects.filter(pk=job.pk).update(next_run_at=slot)
    leader_a = leases.take("test-leader", "node-a", ttl=1)
    connections.close_all()
    undo = leases.limit_pauses(1)  # what the scheduler does at start, with a TTL of 1 s
    try:
        paused, outcome = paused_after_its_first_lock(lambda: dispatch.dispatch_due(lease=leader_a))
        leader_b = wait_for(lambda: leases.take("test-leader", "node-b", ttl=60), timeout=10,
                            message="A's lease to expire and B to take it")
        wait_for(lambda: dispatch.dispatch_due(lease=leader_b).runs_created, timeout=5,
                 message="B to dispatch the job A had locked")
        paused.join(20)
    finally:
        undo()

    assert "result" not in outcome and "error" in outcome
    assert list(JobRun.objects.filter(job=job).values_list("scheduled_for", flat=True)) == [slot]


def paused_after_its_first_lock(work, seconds=8):
    """``work`` in a thread (and a database session) of its own, paused for ``seconds`` right after
    its first statement that locks rows, inside its transaction, as a process frozen there (SIGSTOP,
    a stalled host) would be. Returns once the rows are locked: the thread, and its outcome
    ({"result": ...} or {"error": ...}, filled when it ends)."""
    locked, outcome = threading.Event(), {}

    def pause_once_locked(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "FOR UPDATE" in sql and not locked.is_set():
            locked.set()
            time.sleep(seconds)
        return result

    def run():
        try:
            with connection.execute_wrapper(pause_once_locked):
                outcome["result"] = work()
        except Exception as exc:  # its session was ended while it was paused
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert locked.wait(10), "nothing was locked"
    return thread, outcome


def waiting_on_a_lock(statement):
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                       [statement + "%"])
        return cursor.fetchone()[0]


def test_the_leader_steps_down_when_its_lease_was_taken_and_says_who_leads():
    a, b = Leadership(key="test-leader", ttl=60, name="node-a"), Leadership(key="test-leader", ttl=60, name="node-b")
    assert a.refresh() and not b.refresh()

    Lease.objects.filter(name="test-leader").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert b.refresh()
    assert not a.refresh()  # its renewal fails: another node raised the epoch

    assert (a.held, b.held.epoch) == (None, 2)


def test_status_reads_the_leader_from_the_lease(settings):
    settings.JOBS_LEADER_KEY = "test-leader"
    assert current_leader() is None
    leadership = Leadership(ttl=60, name="node-a")
    leadership.refresh()

    leader = current_leader()
    assert leader["node"] == "node-a"
    assert abs((leader["since"] - timezone.now()).total_seconds()) < 60
    leadership.release()
    assert current_leader() is None


def test_one_retention_pass_at_a_time(settings, caplog):
    settings.JOBS_RETENTION_INTERVAL_SECONDS = 3600
    elsewhere = leases.take(operations_tasks.RETENTION_LEASE, "other-worker", ttl=60)

    operations_tasks.prune_runs()
    assert "another pass is running" in caplog.text

    leases.release(elsewhere)
    caplog.clear()
    operations_tasks.prune_runs()
    assert "retention: deleted" in caplog.text
    assert leases.state(operations_tasks.RETENTION_LEASE)["holder"] is None  # released after the pass


@pytest.mark.postgres("a session paused in a transaction is ended by PostgreSQL (idle_in_transaction_session_timeout)")
def test_a_scheduler_paused_in_any_transaction_loses_its_locks_after_the_leases_ttl():
    # The leader's housekeeping (here: skipping the waiting runs of a paused job) locks runs in
    # transactions of its own; frozen inside one, it kept them from the next leader indefinitely.
    job = save_job(Job(name="paused-before-its-slot", kind="callable", target="builtin.noop", enabled=False),
                   {"type": "interval", "every_seconds": 60})
    slot = timezone.now() - timedelta(seconds=1)
    run = JobRun.objects.create(job=job, scheduled_for=slot, next_attempt_at=slot, status=RunStatus.PENDING,
                                reason="jitter")
    connections.close_all()
    undo = leases.limit_pauses(1)  # what the scheduler does at start, with a TTL of 1 s
    try:
        paused, outcome = paused_after_its_first_lock(lifecycle.release_timed)
        wait_for(lambda: lifecycle.release_timed() == 0 and JobRun.objects.get(pk=run.pk).status == RunStatus.SKIPPED,
                 timeout=5, message="the next leader to skip the run the paused one had locked")
        paused.join(20)
    finally:
        undo()

    assert "error" in outcome
    assert JobRun.objects.get(pk=run.pk).reason == lifecycle.runs.PAUSED_BEFORE_START
