"""History that stays small: delete finished runs past their job's retention policy.

A job keeps its runs for ``retention_days`` (default ``JOBS_RETENTION_DAYS``) and, whatever their
age, at least its newest ``retention_min_runs`` (default ``JOBS_RETENTION_MIN_RUNS``, at least 1,
so the job's ``last_run`` survives). Only terminal runs are ever deleted: a run that is pending,
queued, running or retrying stays however old it is.

On PostgreSQL one query finds the expired runs of a thousand jobs at a time (``EXPIRED_SQL``), so
a pass costs a query per thousand jobs and per batch deleted, not two queries per job.
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

from ..execution.publishing import task_id_for
from ..models import TERMINAL_STATUSES, Job, JobRun

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


JOB_BATCH = 1000  # jobs whose expired runs one query looks for (PostgreSQL)


def prune(now=None, batch_size=None, dry_run=False, jobs=None):
    """Delete the runs that every job's retention policy lets go. ``jobs``: limit to these."""
    started = time.monotonic()
    now = now or timezone.now()
    batch_size = batch_size or settings.JOBS_RETENTION_BATCH
    report = PruneReport()
    full_pass = jobs is None
    jobs = (Job.objects.all() if jobs is None else jobs).only(
        "pk", "name", "retention_days", "retention_min_runs", "last_run_id").order_by("pk")
    if connection.vendor == "postgresql":
        after_pk = 0
        while chunk := list(jobs.filter(pk__gt=after_pk)[:JOB_BATCH]):
            after_pk = chunk[-1].pk
            report.jobs += len(chunk)
            _prune_jobs(chunk, now, batch_size, dry_run, report)
    else:
        for job in jobs:
            report.jobs += 1
            _prune_job(job, now, batch_size, dry_run, report)
    if full_pass and not dry_run:  # the audit trail has a retention of its own
        report.audit_entries = audit_retention.prune(now - timedelta(days=settings.AUDIT_RETENTION_DAYS))
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
    """One job's pass, a query per batch (the path of databases other than PostgreSQL)."""
    candidates = expired_runs(job, now)
    if dry_run:
        _count(report, [job.name] * candidates.count())
        return
    after_id = 0
    while batch := list(candidates.filter(pk__gt=after_id).order_by("pk").values_list("pk", "attempt")[:batch_size]):
        after_id = batch[-1][0]
        _delete(batch, report, dict.fromkeys((pk for pk, _ in batch), job.name))


# Each job's runs older than its cutoff, newest first, past the ones its newest ``keep`` runs
# protect: those newer than the cutoff count first (at most ``keep`` of them are counted). The
# jobs without a run older than their cutoff, most of them on most passes, cost one index probe.
EXPIRED_SQL = f"""
SELECT r.id, r.attempt, j.id
FROM (SELECT * FROM unnest(%(ids)s::bigint[], %(cutoffs)s::timestamptz[], %(keep)s::int[], %(last)s::bigint[])
                    AS j(id, cutoff, keep, last_run_id)
      WHERE EXISTS (SELECT 1 FROM {JobRun._meta.db_table} o WHERE o.job_id = j.id AND o.created_at < j.cutoff)) j
CROSS JOIN LATERAL (
    SELECT r.id, r.attempt, r.status, r.finished_at FROM {JobRun._meta.db_table} r
    WHERE r.job_id = j.id AND r.created_at < j.cutoff
    ORDER BY r.created_at DESC, r.id DESC
    OFFSET GREATEST(0, j.keep - (SELECT count(*) FROM (
        SELECT 1 FROM {JobRun._meta.db_table} n WHERE n.job_id = j.id AND n.created_at >= j.cutoff LIMIT j.keep) newer))
) r
WHERE r.status = ANY(%(terminal)s) AND (r.finished_at IS NULL OR r.finished_at < j.cutoff)
  AND r.id <> COALESCE(j.last_run_id, 0) AND r.id <> ALL(%(left)s::bigint[])
"""


def _prune_jobs(jobs, now, batch_size, dry_run, report):
    """The pass over a batch of jobs (PostgreSQL): one query finds up to a batch of their expired
    runs, the batch is deleted, and again until none is left. A batch that met a lock is left."""
    names = {job.pk: job.name for job in jobs}
    policies = [job.effective_retention for job in jobs]
    params = {"ids": list(names), "cutoffs": [now - timedelta(days=days) for days, _ in policies],
              "keep": [keep for _, keep in policies], "last": [job.last_run_id for job in jobs],
              "terminal": list(TERMINAL_STATUSES), "left": []}
    while True:
        with connection.cursor() as cursor:
            cursor.execute(f"{EXPIRED_SQL} {'' if dry_run else 'LIMIT %(limit)s'}", {**params, "limit": batch_size})
            found = cursor.fetchall()
        if dry_run:
            _count(report, [names[job_id] for _, _, job_id in found])
            return
        if not found:
            return
        if not _delete([(pk, attempt) for pk, attempt, _ in found], report,
                       {pk: names[job_id] for pk, _, job_id in found}):
            params["left"] += [pk for pk, _, _ in found]


def _count(report, job_names):
    report.runs += len(job_names)
    for name in job_names:
        report.per_job[name] = report.per_job.get(name, 0) + 1


def _delete(batch, report, job_names):
    """Delete a batch [(id, attempt)] and count it; False when it met a lock (left for the next
    pass). ``job_names``: {run id: the name of its job}."""
    try:
        deleted, results = delete_batch(batch)
    except OperationalError:
        # Most likely the lock timeout: a row of this batch is busy. The next pass takes it.
        logger.warning("retention: a batch of %s runs met a lock; left for the next pass", len(batch), exc_info=True)
        report.skipped_batches += 1
        return False
    report.batches += 1
    report.task_results += results
    _count(report, [job_names[pk] for pk in deleted])
    return True


def delete_batch(batch):
    """Delete the runs of ``batch`` [(id, attempt)] that are terminal, in one short transaction.
    Returns (the ids of the runs deleted, task results deleted)."""
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
            return [], 0
        JobRun.objects.filter(pk__in=[pk for pk, _ in doomed]).only("pk").delete()
        task_ids = [task_id_for(pk, n) for pk, attempts in doomed for n in range(1, attempts + 1)]
        results, _ = TaskResult.objects.filter(task_id__in=task_ids).delete()
    return [pk for pk, _ in doomed], results
