"""The scheduler's work each tick: turn due slots into runs, and advance each job's next slot.

The cost of a tick follows the number of *due* jobs: they come from the partial index on
``Job.next_run_at``, rows locked with SKIP LOCKED so two schedulers can never work on the same job
at once, and the runs are inserted in bulk with ON CONFLICT DO NOTHING against the one-run-per-slot
constraint, which fences a second leader or a restarted one.
"""

import logging
import random
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from . import runs
from .models import ACTIVE_STATUSES, CatchupPolicy, Job, JobRun, OverlapPolicy, RunStatus, RunTrigger

logger = logging.getLogger(__name__)

MAX_SLOTS_PER_JOB = 1000  # slots examined for one job in one tick, after a long downtime


@dataclass
class TickReport:
    due_jobs: int = 0
    runs_created: int = 0
    slots_skipped: int = 0
    published: list = field(default_factory=list)  # (run id, scheduled_for) of runs published


def plan_slots(job, now, grace):
    """Split the job's due slots into those to run and those to record as skipped.

    A slot no more than ``grace`` late is on time and always runs. Older ones were missed (the
    scheduler was down or behind), and the job's catch-up policy decides what becomes of them.
    Returns (slots to run, slots to skip, the next slot after now or None).
    """
    due, slot = [], job.next_run_at
    while slot is not None and slot <= now and len(due) < MAX_SLOTS_PER_JOB:
        due.append(slot)
        slot = job.slot_after(slot)
    if slot is not None and slot <= now:  # more than MAX_SLOTS_PER_JOB behind: jump ahead
        slot = job.slot_after(now)
    on_time = [s for s in due if now - s <= grace]
    missed = [s for s in due if now - s > grace]
    if job.catchup_policy == CatchupPolicy.ALL:
        keep = missed[-job.catchup_max:] if job.catchup_max else []
    elif job.catchup_policy == CatchupPolicy.LATEST:
        keep = missed[-1:] if missed and not on_time else []
    else:
        keep = []
    skipped = [s for s in missed if s not in keep]
    return keep + on_time, skipped, slot


def dispatch_due(now=None, batch=None):
    now = now or timezone.now()
    batch = batch or settings.JOBS_DISPATCH_BATCH
    grace = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS)
    report = TickReport()
    with transaction.atomic():
        jobs = list(
            Job.objects.filter(enabled=True, next_run_at__lte=now)
            .order_by("next_run_at")
            .select_related("crontab", "interval", "clocked")
            .select_for_update(skip_locked=True, of=("self",))[:batch]
        )
        if not jobs:
            return report
        report.due_jobs = len(jobs)
        rows = []
        busy = active_runs_by_job([job.pk for job in jobs if job.overlap_policy != OverlapPolicy.ALLOW])
        for job in jobs:
            to_run, to_skip, next_slot = plan_slots(job, now, grace)
            for slot in to_run:
                rows.append(place_slot(job, slot, busy, now))
            for slot in to_skip:
                rows.append((job, slot, RunStatus.SKIPPED, f"missed: catch-up policy '{job.catchup_policy}'", None))
            job.next_run_at = next_slot
        replaced = [run_id for job in jobs if job.overlap_policy == OverlapPolicy.REPLACE
                    for run_id in busy.get(job.pk, [])]
        for run in JobRun.objects.filter(pk__in=replaced):
            runs.cancel(run, reason="replaced by a newer slot (overlap policy 'replace')")
        created = insert_runs(rows, now)
        by_job = {job.pk: job for job in jobs}
        for run_id, job_id, status in created:
            job = by_job[job_id]
            job.last_run_id = max(run_id, job.last_run_id or 0)
            if status == RunStatus.QUEUED:
                report.runs_created += 1
                runs.publish_on_commit(run_id, 1, job)
                report.published.append(run_id)
            else:
                report.slots_skipped += 1
        Job.objects.bulk_update(jobs, ["next_run_at", "last_run"], batch_size=1000)
    return report


def seconds_until_next_due(now=None):
    """Seconds until the earliest next slot of an enabled job (from the due-jobs index)."""
    next_at = (
        Job.objects.filter(enabled=True, next_run_at__isnull=False)
        .order_by("next_run_at").values_list("next_run_at", flat=True).first()
    )
    if next_at is None:
        return float("inf")
    return (next_at - (now or timezone.now())).total_seconds()


def active_runs_by_job(job_ids):
    """{job id: [ids of its runs still queued, running, retrying or waiting]} for these jobs."""
    busy = {}
    if job_ids:
        active = JobRun.objects.filter(job_id__in=job_ids, status__in=ACTIVE_STATUSES).values_list("job_id", "pk")
        for job_id, run_id in active:
            busy.setdefault(job_id, []).append(run_id)
    return busy


def place_slot(job, slot, busy, now):
    """The row for a slot that is to run, after the job's overlap policy and jitter."""
    earlier = busy.get(job.pk)
    if earlier and job.overlap_policy == OverlapPolicy.SKIP:
        return (job, slot, RunStatus.SKIPPED, f"overlap: run #{earlier[0]} was still active", None)
    if earlier and job.overlap_policy == OverlapPolicy.QUEUE:
        return (job, slot, RunStatus.PENDING, f"waiting for run #{earlier[0]} (overlap policy 'queue')", None)
    if job.overlap_policy in (OverlapPolicy.SKIP, OverlapPolicy.QUEUE):
        busy[job.pk] = ["this tick"]
    if job.jitter_seconds:
        start_at = max(slot, now) + timedelta(seconds=random.uniform(0, job.jitter_seconds))
        return (job, slot, RunStatus.PENDING, "jitter", start_at)
    return (job, slot, RunStatus.QUEUED, "", None)


_COLUMNS = (
    "job_id", "status", "trigger", "scheduled_for", "attempt", "max_attempts", "created_at",
    "queued_at", "finished_at", "next_attempt_at", "publish_count", "worker", "output", "output_bytes", "error",
    "reason",
)


def insert_runs(rows, now):
    """Insert runs, leaving alone any slot that already has one. Returns (id, job_id, status)."""
    created = []
    table = JobRun._meta.db_table
    placeholders = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    for start in range(0, len(rows), 500):
        chunk = rows[start:start + 500]
        params = []
        for job, slot, status, reason, start_at in chunk:
            queued_at = now if status == RunStatus.QUEUED else None
            finished_at = now if status == RunStatus.SKIPPED else None
            params += [job.pk, status, RunTrigger.SCHEDULE, slot, 1, job.max_attempts, now,
                       queued_at, finished_at, start_at, 0, "", "", 0, "", reason]
        sql = (
            f"INSERT INTO {table} ({', '.join(_COLUMNS)}) VALUES "
            + ", ".join([placeholders] * len(chunk))
            + " ON CONFLICT (job_id, scheduled_for) DO NOTHING RETURNING id, job_id, status"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            created += cursor.fetchall()
    return created
