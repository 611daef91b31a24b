"""The scheduler's work each tick: turn due slots into runs, and advance each job's next slot.

The cost of a tick follows the number of *due* jobs: they come from the partial index on
``Job.next_run_at``, rows locked with SKIP LOCKED so two schedulers can never work on the same job
at once, and the runs are inserted in bulk with ON CONFLICT DO NOTHING against the one-run-per-slot
constraint, which fences a second leader or a restarted one.
"""

import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q

from .. import kinds, lifecycle
from ..coordination import leases
from ..lifecycle import ahead as held_ahead
from ..lifecycle import arrays
from ..models import ACTIVE_STATUSES, CatchupPolicy, Job, JobRun, OverlapPolicy, RunStatus
from ..models.calendar import day_rules_cache
from ..models.window import WindowMode, hold_reason, window_book
from ..timing import clock

logger = logging.getLogger(__name__)

MAX_SLOTS_PER_JOB = 1000  # slots examined for one job in one tick, after a long downtime
# What a tick reads of a due job: its schedule, policies and what publishing needs. Leaving out
# the JSON columns (args, environment, headers...) halves the cost of loading a batch. A field read
# in a tick and missing here is a query per due job (Django loads a deferred field on first access):
# the DST policy's two cost 4,000 statements a batch, dispatch lag p99 8.9 s at 1,000,000 jobs.
TICK_FIELDS = (
    "schedule_type", "crontab", "interval", "clocked", "next_run_at", "last_run", "catchup_policy", "catchup_max",
    "overlap_policy", "jitter_seconds", "max_retries", "kind", "queue", "timeout_seconds",
    "priority", "parameters", "calendars", "business_days", "business_day_of_month",
    "name", "spread",  # the slot's offset (Job.spread_offset); the name also names a trace
    "dst_skipped", "dst_repeated",  # a cron slot's DST policy (Job.schedule_slot_after)
    "version",  # the run names the job's version (JobRun.job_version)
)


# The jobs whose runs may be created ahead of their slot (JOBS_DISPATCH_AHEAD_SECONDS): with an
# overlap policy other than 'allow' what becomes of a slot depends on the runs active at the slot,
# and a jittered run waits for a time of its own.
AHEAD_OF_SLOT = Q(overlap_policy=OverlapPolicy.ALLOW, jitter_seconds=0)


def goes_ahead(job):
    return job.overlap_policy == OverlapPolicy.ALLOW and not job.jitter_seconds


def crowded_slots(now, until):
    """The slots in (now, until] whose runs are made ahead: those at least
    JOBS_DISPATCH_AHEAD_MIN_JOBS jobs that may go ahead share (the runs already made ahead for a
    slot count among them, so a slot stays crowded while its batches are made). None when every
    slot goes ahead (a minimum of 1)."""
    minimum = settings.JOBS_DISPATCH_AHEAD_MIN_JOBS
    if minimum <= 1:
        return None
    # Runs are made ahead for crowded slots only, so these are a few slots. The jobs are counted in
    # the database, and only the slots they crowd alone, or that have runs held ahead, come back:
    # with 100,000 one-minute jobs on distinct slots that was 17,000 and 25,000 rows, every tick.
    made = Counter({slot: number for slot, number in held_ahead.held_runs().items() if now < slot <= until})
    jobs = (Job.objects.filter(AHEAD_OF_SLOT, enabled=True, next_run_at__gt=now, next_run_at__lte=until)
            .order_by().values_list("next_run_at").annotate(number=Count("id"))
            .filter(Q(number__gte=minimum) | Q(next_run_at__in=list(made))))
    counts = made + Counter(dict(jobs))
    return {slot for slot, number in counts.items() if number >= minimum}


@dataclass
class TickReport:
    due_jobs: int = 0
    runs_created: int = 0
    slots_skipped: int = 0
    runs_ahead: int = 0  # created queued for a slot still to come, their messages held (lifecycle.ahead)
    runs_waiting: int = 0  # created pending: jittered, or behind an earlier run
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


def dispatch_due(now=None, batch=None, lease=None):
    """One tick's batch of due jobs in one transaction. ``lease``: the leader's (leases.Held); the
    transaction commits only while it is still the leader's (raises leases.LeaseLost)."""
    now = now or clock.now()
    batch = batch or settings.JOBS_DISPATCH_BATCH
    grace = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS)
    report = TickReport()
    horizon = now + timedelta(seconds=settings.JOBS_DISPATCH_AHEAD_SECONDS)
    crowded = crowded_slots(now, horizon) if horizon > now else set()
    due = Q(next_run_at__lte=now)
    if crowded is None or crowded:
        ahead_of_slot = AHEAD_OF_SLOT if crowded is None else AHEAD_OF_SLOT & Q(next_run_at__in=crowded)
        # The bound on its own, not only inside the OR: it is the due-jobs index's condition, where
        # an OR alone leaves PostgreSQL to walk the index from its start filtering every job.
        due = Q(next_run_at__lte=max(crowded) if crowded else horizon) & (due | ahead_of_slot)
    # (The scheduler's sessions end when paused past the lease's TTL, leases.limit_pauses: a leader
    # frozen with the due jobs locked does not keep them from the next one, whose SKIP LOCKED passes them.)
    with transaction.atomic():
        plan_each_statement_afresh()
        jobs = list(
            Job.objects.filter(due, enabled=True)
            .order_by("next_run_at")
            .select_related("crontab", "interval", "clocked")
            .only(*TICK_FIELDS)
            .select_for_update(skip_locked=True, of=("self",))[:batch]
        )
        if not jobs:
            return report
        report.due_jobs = len(jobs)
        if any(job.has_day_rules for job in jobs):
            day_rules_cache.refresh(force=True)  # a calendar changed a moment ago counts in this tick
        rows = []
        busy = active_runs_by_job([job.pk for job in jobs if job.overlap_policy != OverlapPolicy.ALLOW])
        elsewhere = kinds.running_elsewhere()
        # The maintenance windows of this tick, from the process's copy (read at most every second).
        in_window = held_by_window if window_book.any(WindowMode.HOLD) else None
        for job in jobs:
            to_run, to_skip, next_slot = plan_slots(job, now, grace)
            if job.kind in elsewhere:
                # Run elsewhere: their pings make their runs (lifecycle.pings); only the next slot moves on.
                job.next_run_at = next_slot
                continue
            for slot in to_run:
                rows.append(in_window and in_window(job, slot) or place_slot(job, slot, busy, now))
            for slot in to_skip:
                rows.append((job, slot, RunStatus.SKIPPED, f"missed: catch-up policy '{job.catchup_policy}'", None))
            slots_ahead = 0
            while (next_slot is not None and next_slot <= horizon and slots_ahead < MAX_SLOTS_PER_JOB
                   and goes_ahead(job) and (crowded is None or next_slot in crowded)
                   and not (in_window and in_window(job, next_slot))):  # a held slot's run is made when it is due
                rows.append((job, next_slot, RunStatus.QUEUED, "", next_slot))
                next_slot, slots_ahead = job.slot_after(next_slot), slots_ahead + 1
            job.next_run_at = next_slot
        replaced = [run_id for job in jobs if job.overlap_policy == OverlapPolicy.REPLACE
                    for run_id in busy.get(job.pk, [])]
        if replaced:
            # After the commit, before the new runs are published: cancelling tells a workflow,
            # whose hook locks its workflow run, and this transaction holds job rows that a
            # workflow starting a step (holding that lock) would wait for.
            transaction.on_commit(lambda: cancel_replaced(replaced))
        created = lifecycle.create_runs(rows, now)
        by_job = {job.pk: job for job in jobs}
        to_publish, to_hold = [], []
        for run_id, job_id, status, slot in created:
            job = by_job[job_id]
            job.last_run_id = max(run_id, job.last_run_id or 0)
            if status == RunStatus.QUEUED and slot > now:
                report.runs_ahead += 1
                to_hold.append((run_id, 1, job, slot))
            elif status == RunStatus.QUEUED:
                report.runs_created += 1
                to_publish.append((run_id, 1, job))
                report.published.append(run_id)
            elif status == RunStatus.PENDING:
                report.runs_waiting += 1
            else:
                report.slots_skipped += 1
        advance_jobs(jobs)
        lifecycle.publish_on_commit(to_publish)
        held_ahead.hold_on_commit(to_hold)
        if lease is not None:
            leases.fence(lease, idle_timeout=settings.JOBS_LEADER_TTL_SECONDS)
    return report


def cancel_replaced(run_ids):
    for run in JobRun.objects.filter(pk__in=run_ids).select_related("job"):
        lifecycle.cancel(run, reason="replaced by a newer slot (overlap policy 'replace')")


def advance_jobs(jobs):
    """Write each job's next slot and last run: on PostgreSQL one UPDATE ... FROM unnest(...), where
    bulk_update would build a CASE expression with a branch per job."""
    if connection.vendor != "postgresql":
        Job.objects.bulk_update(jobs, ["next_run_at", "last_run"], batch_size=1000)
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Job._meta.db_table} AS j SET next_run_at = v.next_run_at, last_run_id = v.last_run_id "
            "FROM unnest(%s::bigint[], %s::timestamptz[], %s::bigint[]) AS v(id, next_run_at, last_run_id) "
            "WHERE j.id = v.id",
            [arrays.literal([job.pk for job in jobs]), arrays.literal([job.next_run_at for job in jobs]),
             arrays.literal([job.last_run_id for job in jobs])],
        )


def plan_each_statement_afresh():
    """Plan this transaction's statements for the tables as they are now (PostgreSQL only).

    The deferred foreign-key checks of a tick (a run's job, a job's last run) are statements that
    PostgreSQL caches per session. Beat's session is long-lived: a plan made while the runs table
    was nearly empty (a new deployment, a first tick) scans the whole table, and kept as the
    session's generic plan it made each of 2,000 checks a scan of a table growing by 2,000 runs a
    tick, seconds per commit at 100,000 jobs, until autovacuum analysed the table.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL plan_cache_mode TO force_custom_plan")


def seconds_until_next_due(now=None):
    """Seconds until the scheduler has something to do: the earliest next slot of an enabled job (from
    the due-jobs index), the earliest slot dispatched ahead less JOBS_DISPATCH_AHEAD_SECONDS (of the
    crowded ones beat may sleep past), the earliest slot whose messages are held (lifecycle.ahead),
    and the earliest start time of a waiting run."""
    now = now or clock.now()
    ahead = timedelta(seconds=settings.JOBS_DISPATCH_AHEAD_SECONDS)
    enabled = Job.objects.filter(enabled=True, next_run_at__isnull=False).order_by("next_run_at")
    moments = [enabled.values_list("next_run_at", flat=True).first()]
    if ahead:
        crowded = crowded_slots(now, now + ahead + timedelta(seconds=settings.CELERY_BEAT_MAX_LOOP_INTERVAL))
        # A job's next slot, not the slot itself: a crowded slot whose runs are all made waits for
        # its messages to go out (below), and woke the scheduler every 0.1 s until it while it counted here.
        ahead_jobs = enabled.filter(AHEAD_OF_SLOT)
        if crowded is not None:
            ahead_jobs = ahead_jobs.filter(next_run_at__in=crowded)
        first_ahead = ahead_jobs.values_list("next_run_at", flat=True).first()
        moments.append(first_ahead and first_ahead - ahead)
    moments.append(held_ahead.next_slot())
    moments.append(JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__isnull=False)
                   .order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first())
    moments = [moment for moment in moments if moment is not None]
    return (min(moments) - now).total_seconds() if moments else float("inf")


def active_runs_by_job(job_ids):
    """{job id: [ids of its runs still queued, running, retrying or waiting]} for these jobs."""
    busy = {}
    if job_ids:
        active = JobRun.objects.filter(job_id__in=job_ids, status__in=ACTIVE_STATUSES).values_list("job_id", "pk")
        for job_id, run_id in active:
            busy.setdefault(job_id, []).append(run_id)
    return busy


def held_by_window(job, slot):
    """The row of a slot a ``hold`` maintenance window covers (born skipped), or None."""
    window = window_book.covering(WindowMode.HOLD, job.pk, slot)
    return (job, slot, RunStatus.SKIPPED, hold_reason(window), None) if window else None


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
