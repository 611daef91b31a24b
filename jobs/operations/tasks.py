"""The operator tools' periodic tasks: the slot check and the retention pass."""

import logging
import os
import socket

from celery import shared_task
from django.conf import settings

from ..coordination import leases
from . import retention, slot_report

logger = logging.getLogger(__name__)

RETENTION_LEASE = "jobs:retention"  # one pass at a time across all workers (a lease, jobs/coordination/leases.py)


@shared_task(name="jobs.check_slots", ignore_result=True)
def check_slots():
    """Alert the recent slots of every job that left no run and no reason (slot_report)."""
    return slot_report.check_recent()


@shared_task(name="jobs.prune_runs", ignore_result=True)
def prune_runs():
    """The periodic retention pass (CELERY_BEAT_SCHEDULE); one at a time across all workers."""
    if not settings.JOBS_RETENTION_INTERVAL_SECONDS:
        return  # turned off; a PeriodicTask row left from before may still send it
    held = leases.take(RETENTION_LEASE, f"{socket.gethostname()}:{os.getpid()}",
                       ttl=max(60, settings.JOBS_RETENTION_INTERVAL_SECONDS))
    if held is None:
        logger.info("retention: another pass is running; skipping this one")
        return
    try:
        report = retention.prune()
        logger.info("retention: deleted %s runs and %s task results of %s jobs in %.1f s (%s batches skipped)",
                    report.runs, report.task_results, report.jobs, report.seconds, report.skipped_batches)
    finally:
        leases.release(held)
