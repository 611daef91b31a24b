"""The one Celery task of the service: run one attempt of one run."""

import logging
import os
import threading
import traceback as tb

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connection

from . import runs
from .executors import JobFailed, JobTimedOut, RunContext, get_executor

logger = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Refreshes the attempt's heartbeat while it runs; sets ``stopped`` when the run was taken
    from this attempt (cancelled, or declared lost by the monitor) so the executor can stop."""

    def __init__(self, run_id, attempt):
        super().__init__(daemon=True, name=f"heartbeat-{run_id}-{attempt}")
        self.run_id, self.attempt = run_id, attempt
        self.stopped = threading.Event()
        self._done = threading.Event()

    def run(self):
        try:
            while not self._done.wait(settings.JOBS_HEARTBEAT_SECONDS):
                try:
                    if not runs.heartbeat(self.run_id, self.attempt):
                        self.stopped.set()
                        return
                except Exception:
                    logger.warning("heartbeat of run %s failed; retrying", self.run_id, exc_info=True)
                    # Drop a connection the database closed (a restart): this thread's health
                    # check already ran, so Django would otherwise reuse it broken forever.
                    close_old_connections()
        finally:
            connection.close()

    def finish(self):
        self._done.set()
        self.join(timeout=5)


@shared_task(bind=True, name="jobs.execute_run", acks_late=True, reject_on_worker_lost=True)
def execute_run(self, run_id, attempt):
    worker = self.request.hostname or "unknown"
    run = runs.claim(run_id, attempt, worker=worker, pid=os.getpid())
    if run is None:
        logger.info("run %s attempt %s is already claimed or finished; dropping this delivery", run_id, attempt)
        return {"run_id": run_id, "attempt": attempt, "duplicate": True}

    beat = Heartbeat(run_id, attempt)
    beat.start()
    context = RunContext(run_id=run_id, attempt=attempt, job=run.job,
                         timeout_seconds=run.job.timeout_seconds, cancelled=beat.stopped)
    try:
        outcome = get_executor(run.job.kind).execute(context)
    except JobFailed as exc:
        beat.finish()
        close_old_connections()
        runs.record_failure(run_id, attempt, str(exc), traceback=tb.format_exc(), output=exc.output,
                            output_bytes=exc.output_bytes, timed_out=isinstance(exc, JobTimedOut))
        raise
    except BaseException as exc:
        beat.finish()
        close_old_connections()
        runs.record_failure(run_id, attempt, f"{type(exc).__name__}: {exc}", traceback=tb.format_exc())
        raise
    beat.finish()
    # The job may have run for hours: re-check the connection (health check) before recording,
    # so a database restart meanwhile does not lose the outcome.
    close_old_connections()
    runs.record_success(run_id, attempt, outcome.output, outcome.output_bytes, outcome.result)
    return {"run_id": run_id, "attempt": attempt, "result": outcome.result}


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
