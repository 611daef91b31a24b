"""Runs queued ahead of their slot (dispatching ahead, JOBS_DISPATCH_AHEAD_SECONDS).

A crowded slot's runs are made seconds before it, born queued for the slot (``queued_at`` is the
slot); their messages are built, and bundled, once that commits, and kept here, in the leader's
memory, until the slot. At the slot, publishing them is all there is left to do: no statement
stands between a crowded slot and its messages but one that finds the jobs paused meanwhile, whose
runs are skipped instead.

A leader that stops with messages held leaves their runs queued with no message. Its successor, or
the same process started again, takes them over on its first tick as leader (``adopt``): it holds
them again until their slot, or publishes them at once when the slot has passed. Runs older than
JOBS_REPUBLISH_AFTER_SECONDS are left to the monitor, which publishes queued runs again after that
long. A message sent twice finds its run claimed, and is dropped.
"""

import functools
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from ..models import Job, JobRun, RunStatus, RunTrigger
from ..telemetry import tracing
from ..timing import clock
from . import arrays, bundling, runs

_held = {}  # slot -> [Batch], in the order made


class Batch(NamedTuple):
    """A tick's messages for one slot, and the same as they go to the broker (bundled), made when
    they were held; None while traces are on (each message is sent in its run's trace)."""

    messages: list
    grouped: list | None


def hold_on_commit(items):
    """Hold the messages of (run id, attempt, job, slot) items, runs queued for their slot, until
    that slot, once the transaction that made the runs commits."""
    if items:
        transaction.on_commit(functools.partial(_hold, items))


def _hold(items):
    by_slot = {}
    for run_id, attempt, job, slot in items:
        by_slot.setdefault(slot, []).append(runs.message_for(run_id, attempt, job))
    for slot, messages in by_slot.items():
        # Bundled now, not at the slot: which jobs are short is a query.
        grouped = None if tracing.enabled() else bundling.grouped(messages, [m.job_id for m in messages])
        _held.setdefault(slot, []).append(Batch(messages, grouped))


def held_runs():
    """{slot: how many runs' messages are held for it}."""
    return {slot: sum(len(batch.messages) for batch in batches) for slot, batches in _held.items()}


def next_slot():
    """The earliest slot whose messages are held, or None."""
    return min(_held, default=None)


def publish_due(now=None):
    """Publish the held messages of every slot at or before ``now`` (the database's clock; a paused
    job's runs are skipped instead). Returns how many runs were published."""
    if not _held:
        return 0
    now = now or clock.now()
    batches = [batch for slot in sorted(_held) if slot <= now for batch in _held[slot]]
    if not batches:
        return 0
    messages = [message for batch in batches for message in batch.messages]
    paused = _paused({m.job_id for m in messages})
    for slot in [slot for slot in _held if slot <= now]:
        del _held[slot]
    if paused:  # (rare) their runs skipped, the others bundled again without them
        skipped = JobRun.objects.filter(pk__in=[m.run_id for m in messages if m.job_id in paused], status=RunStatus.QUEUED)
        runs.skip_paused_before_start(skipped, RunStatus.QUEUED, now)
        messages = [m for m in messages if m.job_id not in paused]
        runs.publish_messages_or_log(messages)
    elif any(batch.grouped is None for batch in batches):
        runs.publish_messages_or_log(messages)
    else:
        runs.publish_messages_or_log([sent for batch in batches for sent in batch.grouped], grouped=True)
    return len(messages)


def _paused(job_ids):
    """Those of ``job_ids`` paused: on PostgreSQL as one array literal, which costs a fraction of an IN list of
    10,000 placeholders (0.6 s, most of it building the statement)."""
    if connection.vendor != "postgresql":
        return set(Job.objects.filter(pk__in=job_ids, enabled=False).values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {Job._meta.db_table} WHERE id = ANY(%s::bigint[]) AND NOT enabled",
                       [arrays.literal(list(job_ids))])
        return {job_id for (job_id,) in cursor.fetchall()}


def adopt(now=None):
    """Hold, or publish at once, the runs a leader before this one queued ahead and may not have
    published: scheduled runs queued at their slot, that slot not older than
    JOBS_REPUBLISH_AFTER_SECONDS. Returns how many were taken over."""
    now = now or clock.now()
    since = now - timedelta(seconds=settings.JOBS_REPUBLISH_AFTER_SECONDS)
    taken = (JobRun.objects.filter(status=RunStatus.QUEUED, trigger=RunTrigger.SCHEDULE, queued_at__gte=since,
                                   queued_at=F("scheduled_for"), waiting_since__isnull=True)
             .select_related("job").only("attempt", "scheduled_for", *(f"job__{name}" for name in HELD_JOB_FIELDS)))
    items = [(run.pk, run.attempt, run.job, run.scheduled_for) for run in taken]
    _held.clear()  # what the database says is waiting replaces what this process held
    if items:
        _hold(items)
        publish_due(now)
    return len(items)


# What a message needs of its job (runs.message_for) and what bundling asks.
HELD_JOB_FIELDS = ("queue", "kind", "timeout_seconds", "priority")


def forget():
    """Drop every held message (a test that plays a leader dying)."""
    _held.clear()
