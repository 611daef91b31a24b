"""Limits shared across jobs (``jobs.models.Limit``), where a run starts: the claim.

A job that names a limit (``Job.limit_key``) is claimed the slow way (``attempts.claim_by_orm``):
in one transaction that holds the limit's row locked (``locked``), its running runs are counted,
its starts of the last 60 seconds read, and the run is taken only if there is room (``admit``).
A key that names no limit (its row deleted behind the service's back) runs unlimited.
Two workers can then never both take the last place: the second waits for the first's lock and
counts after its commit (a statement that locked and counted at once would count from before the
wait, on PostgreSQL). On SQLite the transaction itself takes the database's write lock.

A run turned away stays ``queued``, marked ``waiting_since``; its message is acknowledged, so it
costs no worker while it waits. When a run of the key leaves ``running`` (it ended, failed, was lost
or cancelled) the lifecycle wakes the first waiting runs, as many as there is room for
(``runs.wake_waiting``), and the leader's monitor does the same for every key once a pass, as a
safety net and for a rate limit's minute that passed. Waiting runs start in order: the most urgent
job first (``priority``), then the earliest slot; a run is turned away while a waiting run of the key
is ahead of it. Jobs that name no limit never come here: their claim is the single statement it
was (``postgres.CLAIM_SQL``).
"""

import logging
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Q

from ..models import JobRun, Limit, RunStatus

logger = logging.getLogger(__name__)

WINDOW = timedelta(seconds=60)


def applies(run):
    """Whether claiming ``run`` goes through its limit: its job names one, or it waited for one."""
    return bool(run.job.limit_key) or run.waiting_since is not None


def locked(key):
    """The limit of ``key``, its row locked until the transaction ends; None when there is none."""
    limits = Limit.objects.filter(key=key)
    if connection.features.has_select_for_update:
        limits = limits.select_for_update()
    return limits.first()


def running_count(key):
    return JobRun.objects.filter(status=RunStatus.RUNNING, job__limit_key=key).count()


def recent_starts(limit, now):
    """The starts of the last 60 seconds (by the database's clock) that the limit's row holds."""
    cutoff = now - WINDOW
    starts = (datetime.fromisoformat(text) for text in limit.recent_starts or [])
    return [start for start in starts if start > cutoff]


def room(limit, now, running=None):
    """How many more runs of the limit may start now."""
    running = running_count(limit.key) if running is None else running
    free = limit.max_running - running
    if limit.max_starts_per_minute:
        free = min(free, limit.max_starts_per_minute - len(recent_starts(limit, now)))
    return max(free, 0)


def waiting(key):
    """The runs waiting for room under ``key``, in the order they start: the most urgent job first,
    then the earliest slot."""
    return (JobRun.objects.filter(status=RunStatus.QUEUED, waiting_since__isnull=False, job__limit_key=key)
            .order_by("-job__priority", "scheduled_for", "pk"))


def ahead_of(run):
    """Waiting runs of the run's limit that start before it."""
    priority, slot = run.job.priority, run.scheduled_for
    return waiting(run.job.limit_key).exclude(pk=run.pk).filter(
        Q(job__priority__gt=priority) | Q(job__priority=priority, scheduled_for__lt=slot)
        | Q(job__priority=priority, scheduled_for=slot, pk__lt=run.pk))


def admit(run, limit, now):
    """Whether the run may start ``now`` under ``limit`` (locked by the caller's transaction). When
    it may not, the run is marked waiting (since ``now``, or since it first waited)."""
    if room(limit, now) > 0 and not ahead_of(run).exists():
        return True
    key = run.job.limit_key
    marked = JobRun.objects.filter(pk=run.pk, attempt=run.attempt, status=RunStatus.QUEUED,
                                   waiting_since__isnull=True).update(waiting_since=now)
    if marked:
        run.waiting_since = now
    logger.info("run %s attempt %s waits for its limit %s", run.pk, run.attempt, key)
    return False


def started(limit, now):
    """Count a start against the limit's rate (kept in its row, locked by the caller)."""
    if not limit.max_starts_per_minute:
        return
    starts = [*recent_starts(limit, now), now][-limit.max_starts_per_minute:]
    Limit.objects.filter(pk=limit.pk).update(recent_starts=[start.isoformat() for start in starts])


def waited_fields(run, now):
    """What the claim of a run that waited writes: the wait added up, the mark cleared."""
    if run.waiting_since is None:
        return {}
    return {"waiting_since": None,
            "waited_seconds": run.waited_seconds + max((now - run.waiting_since).total_seconds(), 0.0)}


def waiting_for(run, now):
    """Why a waiting run has not started, in words ("waiting for warehouse (3 of 3 running)"), or
    None when it is not waiting."""
    if run.status != RunStatus.QUEUED or run.waiting_since is None or not run.job.limit_key:
        return None
    key = run.job.limit_key
    limit = Limit.objects.filter(key=key).first()
    if limit is None:
        return None
    running = running_count(key)
    if running >= limit.max_running:
        return f"waiting for {key} ({running} of {limit.max_running} running)"
    starts = len(recent_starts(limit, now))
    if limit.max_starts_per_minute and starts >= limit.max_starts_per_minute:
        return f"waiting for {key} ({starts} of {limit.max_starts_per_minute} starts in the last minute)"
    ahead = ahead_of(run).count()
    if ahead:
        return f"waiting for {key} ({ahead} waiting run{'s' if ahead != 1 else ''} of it ahead of this one)"
    return f"waiting for {key} (room has freed: starting)"
