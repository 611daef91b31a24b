"""History that stays small: delete finished runs past their job's retention policy.

A job keeps its runs for ``retention_days`` (default ``JOBS_RETENTION_DAYS``) and, whatever their
age, at least its newest ``retention_min_runs`` (default ``JOBS_RETENTION_MIN_RUNS``, at least 1,
so the job's ``last_run`` survives). Only terminal runs are ever deleted: a run that is pending,
queued, running or retrying stays however old it is.

Runs are deleted by primary key in batches of ``JOBS_RETENTION_BATCH``, each batch in a short
transaction of its own with a lock timeout, so the pass never holds locks on the runs table for
long and never waits behind a worker: a batch that meets a lock is skipped and left to the next
pass. A batch takes the run's attempts (CASCADE), clears ``Delivery.run`` and ``Job.last_run``
(SET_NULL; a delivery keeps its payload, a snapshot of the run), and deletes the
django-celery-results rows of the run's tasks (``run-<id>-<attempt>``), which nothing else links.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from django_celery_results.models import TaskResult

from audit import retention as audit_retention

from ..models import TERMINAL_STATUSES, Job, JobRun
from ..publishing import task_id_for

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_MS = 1000


@dataclass
class PruneReport:
    jobs: int = 0
    runs: int = 0  # runs deleted, or that would be with dry_run
    task_results: int = 0
    audit_entries: int = 0
    batches: int = 0
    skipped_batches: int = 0  # batches that met a lock and were left for the next pass
    seconds: float = 0.0
    per_job: dict = field(default_factory=dict)  # job name -> runs deleted


def prune(now=None, batch_size=None, dry_run=False, jobs=None):
    """Delete the runs that every job's retention policy lets go. ``jobs``: limit to these."""
    started = time.monotonic()
    now = now or timezone.now()
    batch_size = batch_size or settings.JOBS_RETENTION_BATCH
    report = PruneReport()
    full_pass = jobs is None
    jobs = Job.objects.all() if jobs is None else jobs
    for job in jobs.only("pk", "name", "retention_days", "retention_min_runs", "last_run_id").order_by("pk"):
        report.jobs += 1
        deleted = _prune_job(job, now, batch_size, dry_run, report)
        if deleted:
            report.per_job[job.name] = deleted
    if full_pass and not dry_run:  # the audit trail is kept as long as runs are, by the global policy
        report.audit_entries = audit_retention.prune(now - timedelta(days=settings.JOBS_RETENTION_DAYS))
    report.seconds = time.monotonic() - started
    return report


def expired_runs(job, now):
    """The runs of ``job`` its policy lets go: terminal, finished before the cutoff, and older than
    its newest ``min_runs`` runs."""
    days, min_runs = job.effective_retention
    cutoff = now - timedelta(days=days)
    # The min_runs-th newest run, by the history's order (run_job_recent_idx); older ones may go.
    boundary = (JobRun.objects.filter(job_id=job.pk).order_by("-created_at", "-id")
                .values_list("created_at", "id")[min_runs - 1:min_runs].first())
    if boundary is None:
        return JobRun.objects.none()
    created, pk = boundary
    older = Q(created_at__lt=created) | Q(created_at=created, id__lt=pk)
    return (JobRun.objects.filter(older, job_id=job.pk, status__in=TERMINAL_STATUSES, created_at__lt=cutoff)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__lt=cutoff))
            .exclude(pk=job.last_run_id or 0))


def _prune_job(job, now, batch_size, dry_run, report):
    candidates = expired_runs(job, now)
    if dry_run:
        count = candidates.count()
        report.runs += count
        return count
    deleted, after_id = 0, 0
    while True:
        batch = list(candidates.filter(pk__gt=after_id).order_by("pk").values_list("pk", "attempt")[:batch_size])
        if not batch:
            return deleted
        after_id = batch[-1][0]
        try:
            runs, results = delete_batch(batch)
        except OperationalError:
            # Most likely the lock timeout: a row of this batch is busy. The next pass takes it.
            logger.warning("retention: a batch of job %s met a lock; left for the next pass", job.pk, exc_info=True)
            report.skipped_batches += 1
            continue
        report.batches += 1
        report.runs += runs
        report.task_results += results
        deleted += runs


def delete_batch(batch):
    """Delete the runs of ``batch`` [(id, attempt)] that are terminal, in one short transaction.
    Returns (runs deleted, task results deleted)."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
        # Re-read under a row lock: the database, not this process's earlier read, decides that
        # the runs are terminal (a terminal run never moves, and now cannot until the commit).
        doomed = list(JobRun.objects.select_for_update().filter(pk__in=[pk for pk, _ in batch],
                                                                status__in=TERMINAL_STATUSES)
                      .values_list("pk", "attempt"))
        if not doomed:
            return 0, 0
        _, per_model = JobRun.objects.filter(pk__in=[pk for pk, _ in doomed]).only("pk").delete()
        task_ids = [task_id_for(pk, n) for pk, attempts in doomed for n in range(1, attempts + 1)]
        results, _ = TaskResult.objects.filter(task_id__in=task_ids).delete()
    return per_model.get(JobRun._meta.label, 0), results
