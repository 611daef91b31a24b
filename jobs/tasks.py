"""The Celery tasks of the jobs app: run one attempt of one run (execute_run), and the retention pass."""

import logging
import os
import time
import traceback as tb

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from . import heartbeats, runs
from .executors import JobFailed, JobTimedOut, RunContext, get_executor

logger = logging.getLogger(__name__)

# A run shorter than this records its outcome on the connection it claimed with (checked by the
# task_prerun handler moments ago); a longer one re-checks the connection first.
RECHECK_CONNECTION_AFTER_SECONDS = 1.0


# ignore_result: the run and attempt rows are the record of what ran (status, result, error,
# traceback, worker, pid, timings); a django-celery-results row per task repeated them at the cost
# of two more writes and commits per run (STARTED and the outcome). JOBS_TASK_RESULTS brings it back.
@shared_task(bind=True, name="jobs.execute_run", acks_late=True, reject_on_worker_lost=True,
             ignore_result=not settings.JOBS_TASK_RESULTS)
def execute_run(self, run_id, attempt):
    worker = self.request.hostname or "unknown"
    run = runs.claim(run_id, attempt, worker=worker, pid=os.getpid())
    if run is None:
        logger.info("run %s attempt %s is already claimed or finished; dropping this delivery", run_id, attempt)
        return {"run_id": run_id, "attempt": attempt, "duplicate": True}

    started = time.monotonic()
    try:
        with heartbeats.held(run_id, attempt) as stopped:
            context = RunContext(run_id=run_id, attempt=attempt, job=run.job,
                                 timeout_seconds=run.job.timeout_seconds, cancelled=stopped)
            outcome = get_executor(run.job.kind).execute(context)
    except JobFailed as exc:
        close_old_connections()
        runs.record_failure(run_id, attempt, str(exc), traceback=tb.format_exc(), output=exc.output,
                            output_bytes=exc.output_bytes, timed_out=isinstance(exc, JobTimedOut))
        raise
    except BaseException as exc:
        close_old_connections()
        runs.record_failure(run_id, attempt, f"{type(exc).__name__}: {exc}", traceback=tb.format_exc())
        raise
    if time.monotonic() - started > RECHECK_CONNECTION_AFTER_SECONDS:
        # The job may have run for hours: re-check the connection (health check) before recording,
        # so a database restart meanwhile does not lose the outcome.
        close_old_connections()
    runs.record_success(run_id, attempt, outcome.output, outcome.output_bytes, outcome.result)
    return {"run_id": run_id, "attempt": attempt, "result": outcome.result}


@shared_task(name="jobs.check_slots", ignore_result=True)
def check_slots():
    """Alert the recent slots of every job that left no run and no reason (slot_report)."""
    from .slot_report import check_recent

    return check_recent()


@shared_task(name="jobs.prune_runs", ignore_result=True)
def prune_runs():
    """The periodic retention pass (CELERY_BEAT_SCHEDULE); one at a time across all workers."""
    from . import retention
    from .leader import redis_client

    if not settings.JOBS_RETENTION_INTERVAL_SECONDS:
        return  # turned off; a PeriodicTask row left from before may still send it
    lock = redis_client().lock("jobs:retention", timeout=max(60, settings.JOBS_RETENTION_INTERVAL_SECONDS))
    if not lock.acquire(blocking=False):
        logger.info("retention: another pass is running; skipping this one")
        return
    try:
        report = retention.prune()
        logger.info("retention: deleted %s runs and %s task results of %s jobs in %.1f s (%s batches skipped)",
                    report.runs, report.task_results, report.jobs, report.seconds, report.skipped_batches)
    finally:
        try:
            lock.release()
        except Exception:
            logger.warning("retention: the lock expired before the pass ended")
