"""The life of a run: create, publish, claim, record the outcome, retry, lose, cancel.

Every state change is a conditional UPDATE through ``JobRun.transition`` (or an equivalent
filtered update), so two processes can never both move a run, and a worker that comes back after
its attempt was declared lost cannot overwrite what the monitor decided.
"""

import logging
import random

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from notifications import outbox
from workflows import progress as workflow_progress

from . import hotpath, wire
from .models import (
    AttemptOutcome,
    DeliveryCounter,
    Job,
    JobAttempt,
    JobRun,
    RunStatus,
    RunTrigger,
    backoff_delay,
    task_id_for,
)

logger = logging.getLogger(__name__)

DUPLICATES_DROPPED = "duplicate_deliveries_dropped"
SUCCESS_EVENTS = ("succeeded", "recovered")


def time_limits(job):
    """(hard, soft) Celery time limits of an attempt. The hard limit is a backstop behind our own
    timeout handling (the soft limit for functions, the process-group kill for commands)."""
    hard = job.timeout_seconds + 2 * settings.JOBS_KILL_GRACE_SECONDS + 5
    return hard, job.timeout_seconds if job.kind == "callable" else None


def publish(run_id, attempt, job):
    """One message through Celery's own ``apply_async``: the reference the service's messages
    (``publish_many``, jobs/wire.py) are checked against in tests/test_wire.py."""
    from .tasks import execute_run

    hard, soft = time_limits(job)
    execute_run.apply_async(args=[run_id, attempt], task_id=task_id_for(run_id, attempt),
                            queue=job.effective_queue, time_limit=hard, soft_time_limit=soft)


def publish_many(items):
    """Publish (run id, attempt, job) triples: the same messages as ``publish``, one Redis round
    trip per thousand (jobs/wire.py)."""
    messages = []
    for run_id, attempt, job in items:
        hard, soft = time_limits(job)
        messages.append((job.effective_queue, wire.encode(run_id, attempt, job.effective_queue, hard, soft)))
    wire.send(messages)


def publish_on_commit(run_id, attempt, job):
    transaction.on_commit(lambda: _publish_logged([(run_id, attempt, job)]))


def publish_many_on_commit(items):
    if items:
        transaction.on_commit(lambda: _publish_logged(items))


def _publish_logged(items):
    try:
        publish_many(items)
    except Exception:
        # The runs stay queued in the database; the monitor publishes them again.
        logger.exception("could not publish %s run(s) (first: run %s attempt %s); the monitor will retry",
                         len(items), items[0][0], items[0][1])


def run_now(job, user=None):
    """Create a manual run of ``job`` and publish it once the row is committed."""
    now = timezone.now()
    with transaction.atomic():
        run = JobRun.objects.create(
            job=job, trigger=RunTrigger.MANUAL, scheduled_for=now, status=RunStatus.QUEUED,
            queued_at=now, max_attempts=job.max_attempts, triggered_by=user,
        )
        Job.objects.filter(pk=job.pk).update(last_run=run)
        publish_on_commit(run.pk, run.attempt, job)
    return run


def _queued(run_id, attempt):
    return JobRun.objects.select_related("job").filter(pk=run_id, attempt=attempt, status=RunStatus.QUEUED).first()


def claim(run_id, attempt, worker, pid):
    """Take the run for this attempt; None when another delivery already has it, it is over, or it
    missed its start deadline."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        run = hotpath.claim(run_id, attempt, worker, pid, now)
        if run is not None:
            return run
        # Not claimed: find out why (rare, so the slow way): a missed deadline or a duplicate.
        run = _queued(run_id, attempt)
        if run is None or not miss_if_past_deadline(run, now):
            DeliveryCounter.increment(DUPLICATES_DROPPED)
        return None
    run = _queued(run_id, attempt)
    if run is not None and miss_if_past_deadline(run, now):
        return None
    with transaction.atomic():
        claimed = run is not None and run.transition(
            RunStatus.RUNNING, frm=[RunStatus.QUEUED], worker=worker, heartbeat_at=now, started_at=now,
            finished_at=None,
        )
        if not claimed:
            DeliveryCounter.increment(DUPLICATES_DROPPED)
            return None
        JobAttempt.objects.create(
            run_id=run_id, number=attempt, task_id=task_id_for(run_id, attempt),
            worker=worker, pid=pid, started_at=now, heartbeat_at=now,
        )
    return run


def heartbeat(run_id, attempt):
    """Refresh the attempt's heartbeat; False when the run is no longer this attempt's to run."""
    now = timezone.now()
    alive = JobRun.objects.filter(pk=run_id, attempt=attempt, status=RunStatus.RUNNING).update(heartbeat_at=now)
    if alive:
        JobAttempt.objects.filter(run_id=run_id, number=attempt).update(heartbeat_at=now)
    return bool(alive)


def record_success(run_id, attempt, output="", output_bytes=0, result=None):
    now = timezone.now()
    if connection.vendor == "postgresql":
        moved, wanted = hotpath.succeed(run_id, attempt, now, output, output_bytes, result, SUCCESS_EVENTS)
        if not wanted:
            return moved
    with transaction.atomic():
        moved = JobRun.objects.filter(pk=run_id, attempt=attempt, status=RunStatus.RUNNING).update(
            status=RunStatus.SUCCEEDED, finished_at=now, output=output, output_bytes=output_bytes,
            result=result, error="",
        )
        if moved:
            _finish_attempt(run_id, attempt, AttemptOutcome.SUCCEEDED, now)
            run = JobRun.objects.select_related("job").get(pk=run_id)
            outbox.record_event(run, "succeeded")
            workflow_progress.run_ended(run)
    return bool(moved)


def record_failure(run_id, attempt, error, traceback="", output="", output_bytes=0, timed_out=False,
                   lost=False):
    """Record a failed attempt: retry it after a backoff when attempts are left, else finish the run."""
    now = timezone.now()
    outcome = AttemptOutcome.LOST if lost else AttemptOutcome.TIMED_OUT if timed_out else AttemptOutcome.FAILED
    with transaction.atomic():
        run = (
            JobRun.objects.select_for_update(of=("self",)).select_related("job")
            .filter(pk=run_id, attempt=attempt, status=RunStatus.RUNNING).first()
        )
        if run is None:
            return None
        fields = {"error": error, "output": output or run.output, "output_bytes": output_bytes or run.output_bytes}
        if attempt < run.max_attempts:
            delay = backoff_delay(run.job, attempt, random.random)
            run.transition(RunStatus.RETRYING, frm=[RunStatus.RUNNING], next_attempt_at=now + delay, **fields)
            outbox.record_event(run, "attempt_failed")
        else:
            final = RunStatus.TIMED_OUT if timed_out else RunStatus.FAILED
            run.transition(final, frm=[RunStatus.RUNNING], finished_at=now, **fields)
            outbox.record_event(run, "timed_out" if timed_out else "failed")
            workflow_progress.run_ended(run)
        _finish_attempt(run_id, attempt, outcome, now, error=error, traceback=traceback)
    return run.status


def _finish_attempt(run_id, attempt, outcome, now, error="", traceback=""):
    JobAttempt.objects.filter(run_id=run_id, number=attempt, outcome=AttemptOutcome.RUNNING).update(
        outcome=outcome, finished_at=now, error=error, traceback=traceback
    )


def queue_due_retries(now=None, limit=1000):
    """Move runs whose backoff has passed to their next attempt and publish them."""
    now = now or timezone.now()
    published = 0
    due = list(
        JobRun.objects.filter(status=RunStatus.RETRYING, next_attempt_at__lte=now)
        .select_related("job").order_by("next_attempt_at")[:limit]
    )
    for run in due:
        with transaction.atomic():
            moved = JobRun.objects.filter(pk=run.pk, attempt=run.attempt, status=RunStatus.RETRYING).update(
                status=RunStatus.QUEUED, attempt=F("attempt") + 1, queued_at=now, next_attempt_at=None
            )
            if moved:
                publish_on_commit(run.pk, run.attempt + 1, run.job)
                published += 1
    return published


def release_pending(now=None, limit=1000):
    """Queue waiting runs whose time has come: a jittered run once its start time passed, a run
    held back by the 'queue' overlap policy once no earlier run of its job is active."""
    now = now or timezone.now()
    jittered = JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__lte=now)
    held = JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__isnull=True).exclude(
        job__runs__status__in=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING])
    released, seen_jobs = 0, set()
    for run in (jittered | held).select_related("job").order_by("scheduled_for")[:limit]:
        if run.next_attempt_at is None:
            if run.job_id in seen_jobs:
                continue  # one held run per job at a time: the next waits for this one
            seen_jobs.add(run.job_id)
        with transaction.atomic():
            if run.transition(RunStatus.QUEUED, frm=[RunStatus.PENDING], queued_at=now, next_attempt_at=None,
                              reason=""):
                publish_on_commit(run.pk, run.attempt, run.job)
                released += 1
    return released


def skip_past_deadline(now=None):
    """Skip scheduled runs still waiting to start past their job's start deadline (a 'missed' event)."""
    now = now or timezone.now()
    skipped = 0
    with_deadline = Job.objects.filter(start_deadline_seconds__isnull=False).values("pk")
    waiting = JobRun.objects.filter(
        job__in=with_deadline, status__in=[RunStatus.PENDING, RunStatus.QUEUED], attempt=1,
        trigger=RunTrigger.SCHEDULE,
    ).select_related("job")
    for run in waiting:
        if miss_if_past_deadline(run, now):
            skipped += 1
    return skipped


def miss_if_past_deadline(run, now):
    deadline = run.job.start_deadline_seconds
    if not deadline or run.trigger != RunTrigger.SCHEDULE or run.attempt != 1:
        return False
    late = (now - run.scheduled_for).total_seconds()
    if late <= deadline:
        return False
    with transaction.atomic():
        moved = run.transition(RunStatus.SKIPPED, frm=[RunStatus.PENDING, RunStatus.QUEUED], finished_at=now,
                               reason=f"missed: not started within {deadline} s of its slot ({late:.0f} s late)")
        if moved:
            outbox.record_event(run, "missed")
            workflow_progress.run_ended(run)
    return moved


def cancel(run, reason="cancelled"):
    """Cancel a run that has not finished. Idempotent: a finished run is left as it is."""
    now = timezone.now()
    with transaction.atomic():
        moved = JobRun.objects.filter(
            pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING]
        ).update(status=RunStatus.CANCELLED, finished_at=now, reason=reason[:255])
        if moved:
            JobAttempt.objects.filter(run_id=run.pk, outcome=AttemptOutcome.RUNNING).update(
                outcome=AttemptOutcome.CANCELLED, finished_at=now
            )
            workflow_progress.run_ended(run)
    run.refresh_from_db()
    return bool(moved)
