"""Celery signal handlers. None of them may raise into Celery (an exception in a prerun handler
drops the task, celery#1582; in a failure handler it can leave the message unacked, celery#3488)."""

import functools
import logging
import os

from celery.exceptions import TimeLimitExceeded
from celery.signals import (
    task_failure,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)
from django.conf import settings
from django.db import close_old_connections, connection

from .. import kinds
from ..execution.publishing import TASK_NAME
from ..telemetry import logs
from . import hardening, watchdog

logger = logging.getLogger(__name__)



def never_raises(handler):
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            handler(*args, **kwargs)
        except Exception:
            logger.exception("signal handler %s failed", handler.__name__)

    return wrapper


def _checks_its_own_connection(sender):
    # On PostgreSQL execute_run's statements replace a dropped connection themselves
    # (jobs.hotpath); Django's health check here would cost every run a SELECT 1.
    return getattr(sender, "name", None) == TASK_NAME and connection.vendor == "postgresql"


@worker_init.connect
@worker_process_init.connect
@never_raises
def keep_commands_out(**kwargs):
    # The worker and each pool process (forked ones inherit it; set again for other pools).
    if settings.JOBS_WORKER_UNDUMPABLE:
        hardening.make_undumpable()


@worker_init.connect
@never_raises
def start_kinds(**kwargs):
    # In the main process, before the pool forks: its processes inherit what the kinds find
    # (whether commands can be isolated here, and it is said in the log).
    for spec in kinds.kinds().values():
        spec.worker_start()


@worker_ready.connect
@never_raises
def start_watchdog(sender=None, **kwargs):
    # In the worker's main process: one thread, whatever the pool.
    watchdog.start(f"{getattr(sender, 'hostname', None) or 'worker'}:{os.getpid()}")


@worker_shutdown.connect
@never_raises
def stop_watchdog(**kwargs):
    watchdog.stop()


@task_prerun.connect
@never_raises
def log_about_the_run(sender=None, args=None, **kwargs):
    if getattr(sender, "name", None) == TASK_NAME and args and len(args) == 2:
        logs.begin(*args)


@task_postrun.connect
@never_raises
def log_about_no_run(sender=None, **kwargs):
    if getattr(sender, "name", None) == TASK_NAME:
        logs.clear()


@task_prerun.connect
@never_raises
def drop_stale_connections_before(sender=None, **kwargs):
    # A worker child keeps its connection between tasks; one that died with a database restart
    # must not fail the next run.
    if not _checks_its_own_connection(sender):
        close_old_connections()


@task_postrun.connect
@never_raises
def drop_stale_connections_after(sender=None, **kwargs):
    if not _checks_its_own_connection(sender):
        close_old_connections()


@task_failure.connect
@never_raises
def record_hard_time_limit(sender=None, exception=None, args=None, einfo=None, **kwargs):
    """Celery's hard time limit kills the pool child, so the task body never records the
    outcome; the parent process fires this signal and we record the timeout here."""
    if getattr(sender, "name", None) != TASK_NAME or not isinstance(exception, TimeLimitExceeded):
        return
    from .. import lifecycle

    run_id, attempt = args
    close_old_connections()
    lifecycle.record_failure(run_id, attempt, f"Killed at the hard time limit ({exception})",
                        traceback=str(einfo or ""), timed_out=True)
