"""The worker's task: run one attempt of one run (``jobs.execute_run``)."""

import contextlib
import logging
import os
import time
import traceback as tb

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from .. import kinds, lifecycle
from ..execution.output import OutputTail
from ..execution.publishing import TASK_NAME
from ..kinds.base import JobFailed, JobTimedOut, RunContext
from ..lifecycle import stored
from ..telemetry import logs, tracing
from . import heartbeats

logger = logging.getLogger(__name__)

# A run shorter than this records its outcome on the connection it claimed with (checked by the
# task_prerun handler moments ago); a longer one re-checks the connection first.
RECHECK_CONNECTION_AFTER_SECONDS = 1.0
NO_LIMIT = contextlib.nullcontext()


# ignore_result: the run and attempt rows are the record of what ran (status, result, error,
# traceback, worker, pid, timings); a django-celery-results row per task repeated them at the cost
# of two more writes and commits per run (STARTED and the outcome). JOBS_TASK_RESULTS brings it back.
@shared_task(bind=True, name=TASK_NAME, acks_late=True, reject_on_worker_lost=True,
             ignore_result=not settings.JOBS_TASK_RESULTS)
def execute_run(self, run_id, attempt):
    with logs.about_run(run_id, attempt), tracing.attempt(self.request, run_id, attempt):
        return _execute_run(self.request.hostname or "unknown", run_id, attempt)


def _execute_run(worker, run_id, attempt):
    run = through_outage(lifecycle.claim, run_id, attempt, worker=worker, pid=os.getpid())
    if run is None:
        logger.info("run %s attempt %s is already claimed or finished; dropping this delivery", run_id, attempt)
        return {"run_id": run_id, "attempt": attempt, "duplicate": True}
    return run_claimed(worker, run, run_id, attempt)


def run_claimed(worker, run, run_id, attempt, succeed=None, time_limit=None, before_failure=None):
    """Run a claimed attempt and record how it ended. A bundle (jobs.worker.bundle) gives
    ``succeed`` (keeps the success to record with others'), ``time_limit`` (the attempt's soft time
    limit, as a context manager around its execution: the message's is the bundle's) and
    ``before_failure`` (writes when the run started, before its failure is recorded)."""
    logs.name_job(run.job.name)
    tracing.annotate(tracing.run_attributes(job=run.job, slot=run.scheduled_for))

    started = time.monotonic()
    tail = OutputTail(settings.JOBS_OUTPUT_MAX_BYTES)
    try:
        with heartbeats.held(run_id, attempt, output=tail, worker=worker) as beat:
            context = RunContext(run_id=run_id, attempt=attempt, job=run.job, idempotency_key=run.idempotency_key,
                                 params=run.params or {}, timeout_seconds=run.job.timeout_seconds,
                                 cancelled=beat.stopped, output=tail)
            spec = kinds.get(run.job.kind)
            if spec is None:
                raise LookupError(f"the job kind {run.job.kind!r} is not registered on this worker (JOBS_KINDS)")
            if spec.transactional(run.job):
                # Its writes and its success commit together (exactly once), or not at all.
                with time_limit or NO_LIMIT:
                    outcome = lifecycle.succeed_in_one_transaction(run_id, attempt, lambda: spec.execute(context))
                result = stored.result(outcome.result)
                return {"run_id": run_id, "attempt": attempt, "result": result}
            with time_limit or NO_LIMIT:
                outcome = spec.execute(context)
    except lifecycle.OutcomeRefused:
        logger.warning("run %s attempt %s: outcome refused, the run is no longer this attempt's (declared lost "
                       "and run again, or cancelled); its writes were rolled back", run_id, attempt)
        return {"run_id": run_id, "attempt": attempt, "refused": True}
    except JobFailed as exc:
        close_old_connections()
        if before_failure is not None:
            before_failure()
        if beat.fenced:  # the worker stopped it itself, cut off: the infrastructure's loss, not the job's
            record_outcome(lifecycle.record_failure, run_id, attempt, f"Lost: {beat.fenced}", lost=True,
                           output=exc.output, output_bytes=exc.output_bytes, worker=worker)
        else:
            record_outcome(lifecycle.record_failure, run_id, attempt, str(exc), traceback=tb.format_exc(),
                           output=exc.output, output_bytes=exc.output_bytes, timed_out=isinstance(exc, JobTimedOut),
                           worker=worker)
        raise
    except BaseException as exc:
        close_old_connections()
        if before_failure is not None:
            before_failure()
        output, written = tail.snapshot()
        record_outcome(lifecycle.record_failure, run_id, attempt, f"{type(exc).__name__}: {exc}",
                       traceback=tb.format_exc(), output=output, output_bytes=written, worker=worker)
        raise
    if time.monotonic() - started > RECHECK_CONNECTION_AFTER_SECONDS:
        # The job may have run for hours: re-check the connection (health check) before recording,
        # so a database restart meanwhile does not lose the outcome.
        close_old_connections()
    result = stored.result(outcome.result)  # also what a django-celery-results row keeps (JOBS_TASK_RESULTS)
    if succeed is not None:
        succeed(run_id, attempt, outcome.output, outcome.output_bytes, result)
        return {"run_id": run_id, "attempt": attempt, "result": result}
    record_outcome(lifecycle.record_success, run_id, attempt, outcome.output, outcome.output_bytes, result,
                   worker=worker)
    return {"run_id": run_id, "attempt": attempt, "result": result}


def record_outcome(record, run_id, attempt, *args, worker, **kwargs):
    """Record how the attempt ended, through a database outage; say so when it was refused because
    the run is no longer this attempt's (its host was cut off, and it was declared lost and run
    again elsewhere, or it was cancelled): what was decided stands. A claim the database lost in a
    crash is taken back first (``lifecycle.restore_claim``)."""
    def refused(recorded):  # a success says False, a failure None
        return recorded is None or recorded is False

    recorded = through_outage(record, run_id, attempt, *args, **kwargs)
    if refused(recorded) and through_outage(lifecycle.restore_claim, run_id, attempt, worker, os.getpid()):
        recorded = through_outage(record, run_id, attempt, *args, **kwargs)
    tracing.annotate({"jobs.run.outcome": "refused" if refused(recorded)
                      else "succeeded" if recorded is True else str(recorded)})
    if refused(recorded):
        logger.warning("run %s attempt %s: outcome refused, the run is no longer this attempt's "
                       "(declared lost and run again, or cancelled)", run_id, attempt)
    return recorded


def through_outage(record, *args, **kwargs):
    """``record`` (the claim or an outcome), tried again each second while the database is away,
    for up to JOBS_DATABASE_OUTAGE_SECONDS: a database restart then costs the attempt neither its
    start nor its outcome (a lost outcome would run the job again once its heartbeat went stale).
    Safe to repeat: every step of the lifecycle is a conditional update."""
    deadline = time.monotonic() + settings.JOBS_DATABASE_OUTAGE_SECONDS
    while True:
        try:
            return record(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() > deadline:
                raise
            logger.warning("database unavailable for %s (%s); trying again in 1 s", record.__name__, exc)
            connection.close()
            time.sleep(1)
