"""The worker's side of a run: claim it for an attempt, heartbeat, and record how the attempt ended.

A claim is a conditional move from queued to running (one claimant wins; a duplicate delivery is
acknowledged and dropped). An outcome is recorded only while the run is still this attempt's, so
a worker that comes back after its attempt was declared lost cannot overwrite what was decided.
On PostgreSQL the claim and a success nobody listens to are single statements (jobs.lifecycle
.postgres: the same moves, checked against these by tests/test_lifecycle_parity.py).
"""

import logging
import os
import random

from django.db import connection, transaction
from django.db.models.functions import Now

from ..execution.publishing import task_id_for
from ..models import AttemptOutcome, DeliveryCounter, Job, JobAttempt, JobRun, RunStatus, RunTrigger
from ..timing import clock
from . import events, limits, postgres, stored
from .backoff import backoff_delay
from .moves import transition
from .runs import free_room, miss_if_past_deadline, publish_on_commit

logger = logging.getLogger(__name__)

DUPLICATES_DROPPED = "duplicate_deliveries_dropped"


# --- claim

# claim_by_orm's answer for a run its limit turned away (it waits, jobs.lifecycle.limits).
WAITING = object()


def claim(run_id, attempt, worker, pid):
    """Take the run for this attempt: the run (with its job) or None when another delivery has it,
    it is over, it missed its start deadline, or it waits for room under its job's limit."""
    # On PostgreSQL, one statement for a job without a limit; what it leaves (a job with a limit,
    # or nothing to claim) is looked at the slow way.
    run = postgres.claim(run_id, attempt, worker, pid) if connection.vendor == "postgresql" else None
    if run is None:
        run = claim_by_orm(run_id, attempt, worker, pid)
    if run is WAITING:
        return None
    if run is None:
        _not_claimed(run_id, attempt, worker)
    return run


def claim_by_orm(run_id, attempt, worker, pid):
    now = clock.now()
    run = _queued(run_id, attempt)
    if run is None or past_start_deadline(run, now):
        return None
    if limits.applies(run):
        return _claim_within_limit(run, attempt, worker, pid)
    return run if _take(run, attempt, worker, pid, now) else None


def _claim_within_limit(run, attempt, worker, pid):
    with transaction.atomic():
        limit = limits.locked(run.job.limit_key) if run.job.limit_key else None
        now = clock.now()  # after the lock: the rate's minute is counted back from here
        if limit is not None and not limits.admit(run, limit, now):
            return WAITING
        if not _take(run, attempt, worker, pid, now):
            return None
        if limit is not None:
            limits.started(limit, now)
    return run


def _take(run, attempt, worker, pid, now):
    with transaction.atomic():
        if not transition(run, RunStatus.RUNNING, frm=[RunStatus.QUEUED], worker=worker, heartbeat_at=now,
                              started_at=now, finished_at=None, **limits.waited_fields(run, now)):
            return False
        JobAttempt.objects.create(run_id=run.pk, number=attempt, task_id=task_id_for(run.pk, attempt),
                                  worker=worker, pid=pid, started_at=now, heartbeat_at=now)
    return True


def restore_claim(run_id, attempt, worker, pid):
    """Take back this attempt's claim when the database lost it; True when it did.

    On PostgreSQL the claim commits without waiting for its flush (a second wait for the disk on
    every run), so a crash of the database in the moment after it can undo it while the attempt
    runs on: the run is queued again at this very attempt, with no attempt row. Nothing else leaves
    that behind (a run goes back to queued only for its next attempt), so the attempt that finds it
    when its heartbeat or outcome is refused claims the run again, without the start deadline (it
    has started), and goes on: the job is not run twice, and the outcome, durable before its
    message is acknowledged, is recorded. Had another delivery claimed the run meanwhile, this
    does nothing and the attempt is stopped or refused as before."""
    run = _queued(run_id, attempt)
    if run is None or JobAttempt.objects.filter(run_id=run_id, number=attempt).exists():
        return False
    if not _take(run, attempt, worker, pid, clock.now()):
        return False
    logger.warning("run %s attempt %s: its claim was lost (a database crash moments after it); claimed again",
                   run_id, attempt)
    return True


def past_start_deadline(run, now):
    deadline = run.job.start_deadline_seconds
    return bool(deadline and run.trigger == RunTrigger.SCHEDULE and run.attempt == 1
                and (now - run.scheduled_for).total_seconds() > deadline)


# What a claim loads, on every database: the PostgreSQL claim's columns (the run's slot among them,
# which the start deadline checks), and the job's start deadline.
# With what a limit asks (jobs.lifecycle.limits): the job's limit and the run's wait for it.
CLAIM_RUN_FIELDS = [f.name for f in postgres.RUN_FIELDS] + ["waiting_since", "waited_seconds"]
CLAIM_JOB_FIELDS = [f.name for f in postgres.JOB_FIELDS] + ["start_deadline_seconds", "limit_key"]


def _queued(run_id, attempt):
    return _by_id(run_id, attempt, RunStatus.QUEUED, fields=(CLAIM_RUN_FIELDS, CLAIM_JOB_FIELDS))


def _not_claimed(run_id, attempt, worker):
    """Why a delivery did not claim its run (rare, so the slow way): the run missed its start
    deadline (skip it), or the delivery is a duplicate (count it, and see whether it is Celery's
    redelivery of an attempt whose process died here)."""
    run = _queued(run_id, attempt)
    if run is not None and miss_if_past_deadline(run, clock.now()):
        return
    DeliveryCounter.increment(DUPLICATES_DROPPED)
    lose_if_holder_died(run_id, attempt, worker)


def lose_if_holder_died(run_id, attempt, worker):
    """A delivery of an attempt still ``running`` on this very worker, in a pool process that no
    longer exists: Celery delivered it again because that process died (SIGKILL, the OOM killer).
    The attempt is lost, and the run goes on at once from its lost budget, without waiting for
    its heartbeat to go stale."""
    pid = (JobAttempt.objects.filter(run_id=run_id, number=attempt, outcome=AttemptOutcome.RUNNING, worker=worker)
           .values_list("pid", flat=True).first())
    if pid is None or pid == os.getpid() or _process_alive(pid):
        return False
    return record_failure(run_id, attempt, f"Lost: its worker process {pid} on {worker} died", lost=True) is not None


def _process_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has died
    except OSError:
        return False


# --- while it runs

def heartbeat(run_id, attempt, output=None, output_bytes=0):
    """Refresh the attempt's heartbeat, and save the tail of its ``output`` so far when given;
    False when the run is no longer this attempt's to run."""
    fields = {"heartbeat_at": Now()} if output is None else {"heartbeat_at": Now(), "output": stored.output(output),
                                                              "output_bytes": output_bytes}
    alive = JobRun.objects.filter(pk=run_id, attempt=attempt, status__of=[RunStatus.RUNNING]).update(**fields)
    if alive:
        JobAttempt.objects.filter(run_id=run_id, number=attempt).update(heartbeat_at=Now())
    return bool(alive)


def declared_lost(run_id, attempt):
    """Whether the leader declared this attempt lost (its heartbeat went stale): the run may be
    running again elsewhere."""
    return JobAttempt.objects.filter(run_id=run_id, number=attempt, outcome=AttemptOutcome.LOST).exists()


# --- how the attempt ended

def record_success(run_id, attempt, output="", output_bytes=0, result=None):
    """The attempt succeeded: the run is over. False when it was no longer this attempt's. The output
    and result are stored capped (``stored``)."""
    output, result = stored.output(output), stored.result(result)
    if connection.vendor == "postgresql":
        wanted_sql = events.wanted_sql("succeeded")
        if wanted_sql is not None:
            # A run under a limit frees room as it ends: recorded the ordinary way (free_room).
            wanted_sql = f"{wanted_sql} OR j.limit_key <> ''"
            moved, wanted = postgres.succeed(run_id, attempt, output, output_bytes, result, wanted_sql)
            if not wanted:
                return moved
    return succeed_by_orm(run_id, attempt, output, output_bytes, result)


class OutcomeRefused(Exception):
    """The run was no longer this attempt's when its outcome came (declared lost and run again, or
    cancelled): what was decided stands, and what the attempt wrote in its transaction is undone."""


def succeed_in_one_transaction(run_id, attempt, execute):
    """Exactly once for a job whose only effects are rows in this database (a transactional function,
    ``@job_function(transactional=True)``): ``execute()`` (the attempt, returning its outcome: an
    object with ``output``, ``output_bytes`` and ``result``) runs inside one transaction with the
    recording of its success, and both commit together or neither does. Returns the outcome.

    - The claim has committed before (its own statement): the heartbeats, on their own connection,
      show the attempt alive while it runs, and the monitor can declare it lost.
    - The success is the usual conditional move (running, at this attempt): an outcome that comes
      after the attempt was declared lost or cancelled is refused, and ``OutcomeRefused`` rolls the
      job's writes back with it.
    - ``execute`` raising (the job failed, its soft time limit) rolls its writes back; the caller
      then records the failure (``record_failure``) in a transaction of its own.
    - A process killed meanwhile (SIGKILL, the hard time limit, the OOM killer) never commits:
      PostgreSQL rolls the transaction back when its connection goes, and the run is lost and run
      again from its lost budget, from a clean slate.
    On SQLite the same holds, but the whole database is locked for writing from the job's first
    write to the commit (docs/guide/exactly-once.md)."""
    with transaction.atomic():
        outcome = execute()
        if not record_success(run_id, attempt, outcome.output, outcome.output_bytes, outcome.result):
            raise OutcomeRefused(f"run {run_id} is no longer attempt {attempt}'s: its writes are rolled back")
    return outcome


def succeed_by_orm(run_id, attempt, output="", output_bytes=0, result=None):
    now = clock.now()
    with transaction.atomic():
        run = _running(run_id, attempt)
        if run is None or not transition(run, RunStatus.SUCCEEDED, frm=[RunStatus.RUNNING], finished_at=now,
                                             output=output, output_bytes=output_bytes, result=result, error=""):
            return False
        _finish_attempt(run_id, attempt, AttemptOutcome.SUCCEEDED, now)
        events.emit("succeeded", run=run)
        free_room(run.job)
    return True


def record_failure(run_id, attempt, error, traceback="", output="", output_bytes=0, timed_out=False,
                   lost=False):
    """The attempt failed (or timed out): retry after a backoff while the job's retries last, else
    the run ends failed (timed_out). Returns the run's new status, None when it was no longer this
    attempt's.

    A ``lost`` attempt (its worker died or was cut off) is not the job's failure: it spends the
    run's lost budget instead of max_retries, and the run is queued again at once, with no
    backoff; past that budget the run ends ``lost``. The error, traceback and output are stored
    capped (``stored``)."""
    error, traceback, output = stored.error(error), stored.traceback(traceback), stored.output(output)
    now = clock.now()
    outcome = AttemptOutcome.LOST if lost else AttemptOutcome.TIMED_OUT if timed_out else AttemptOutcome.FAILED
    with transaction.atomic():
        run = _running(run_id, attempt, lock=True)
        if run is None:
            return None
        fields = {"error": error, "output": output or run.output, "output_bytes": output_bytes or run.output_bytes}
        if lost:
            _lose(run, attempt, now, fields)
        elif attempt - run.lost_attempts < run.max_attempts:
            delay = backoff_delay(run.job, attempt - run.lost_attempts, random.random)
            transition(run, RunStatus.RETRYING, frm=[RunStatus.RUNNING], next_attempt_at=now + delay, **fields)
            events.emit("attempt_failed", run=run)
        else:
            final = RunStatus.TIMED_OUT if timed_out else RunStatus.FAILED
            transition(run, final, frm=[RunStatus.RUNNING], finished_at=now, **fields)
            events.emit(final.value, run=run)
        _finish_attempt(run_id, attempt, outcome, now, error=error, traceback=traceback)
        free_room(run.job)
    return run.status


def _lose(run, attempt, now, fields):
    lost, allowed = run.lost_attempts + 1, run.job.lost_attempts_allowed
    if lost <= allowed:
        transition(run, RunStatus.QUEUED, frm=[RunStatus.RUNNING], attempt=attempt + 1, lost_attempts=lost,
                       queued_at=now, next_attempt_at=None, **fields)
        publish_on_commit([(run.pk, attempt + 1, run.job)])
        return
    fields["error"] = stored.error(fields["error"], then=f"; lost {lost} times, more than the {allowed} allowed "
                                                        "(max_lost_attempts, JOBS_MAX_LOST_ATTEMPTS)")
    transition(run, RunStatus.LOST, frm=[RunStatus.RUNNING], lost_attempts=lost, finished_at=now, **fields)
    events.emit("lost", run=run)


def _running(run_id, attempt, lock=False):
    return _by_id(run_id, attempt, RunStatus.RUNNING, lock=lock)


def _by_id(run_id, attempt, status, lock=False, fields=None):
    """The run at this attempt if it is in ``status``, then its job, each read by its id and
    nothing else: joined, or ordered as runs are listed (newest first), PostgreSQL could read it
    through the job's runs or from the newest run on, and did when its statistics were stale.
    ``fields``: (the run's, the job's) to load, the rest deferred."""
    found = JobRun.objects.filter(pk=run_id, attempt=attempt, status__of=[status]).order_by()
    jobs = Job.objects.all()
    if fields:
        found, jobs = found.only("job", *fields[0]), jobs.only(*fields[1])
    run = next(iter(found.select_for_update() if lock else found), None)
    if run is not None:
        run.job = jobs.get(pk=run.job_id)
    return run


def _finish_attempt(run_id, attempt, outcome, now, error="", traceback=""):
    JobAttempt.objects.filter(run_id=run_id, number=attempt, outcome=AttemptOutcome.RUNNING).update(
        outcome=outcome, finished_at=now, error=error, traceback=traceback
    )
