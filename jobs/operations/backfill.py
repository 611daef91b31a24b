"""Backfill: create the runs of every slot of a job in a past time range.

Runs go through the lifecycle's bulk insert (``lifecycle.create_runs``, ON CONFLICT DO NOTHING on one
run per slot), so a slot that already has a run, whatever became of it, is left alone and a
backfill is safe to repeat. Backfilled runs have the trigger ``backfill``: the start deadline,
the overlap policy and jitter, which are about the live schedule, do not apply to them.
"""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .. import lifecycle
from ..models import JobRun, RunStatus, RunTrigger, ScheduleType


@dataclass
class Backfill:
    slots: list  # every slot in the range
    existing: dict = field(default_factory=dict)  # slot: run id of slots that already have a run
    created: list = field(default_factory=list)  # ids of the runs created (empty on a dry run)

    @property
    def missing(self):
        return [slot for slot in self.slots if slot not in self.existing]


def check_range(job, start, end, limit, now=None, past_only=False):
    """The job's slots in [start, end), or a ValidationError keyed by field."""
    now = now or timezone.now()
    if job.schedule_type == ScheduleType.MANUAL:
        raise ValidationError({"job": "The job has no schedule (manual only): it has no slots."})
    if start >= end:
        raise ValidationError({"end": "Must be after start."})
    if past_only and end > now:
        raise ValidationError({"end": "Must not be in the future: the scheduler runs the slots to come."})
    try:
        slots = job.slots_between(start, end, limit)
    except (OverflowError, ValueError):
        raise ValidationError({"start": "The range is outside the dates the schedule can compute."}) from None
    if len(slots) > limit:
        raise ValidationError({"end": f"The range holds more than {limit} slots; make it shorter."})
    return slots


def job_runs(job_ids, start, end):
    """The scheduled and backfilled runs of these jobs with a slot in [start, end), in slot order."""
    return (JobRun.objects.filter(job_id__in=job_ids, scheduled_for__gte=start, scheduled_for__lt=end)
            .exclude(trigger=RunTrigger.MANUAL).order_by("scheduled_for", "id"))


def runs_by_slot(job, slots, end, known_runs=None):
    """{slot: its run}: a cron or one-time slot's run has exactly that time; an interval slot's run
    is the first scheduled or backfilled one in [slot, next slot)."""
    if known_runs is None:
        found = job_runs([job.pk], slots[0], end)
    else:
        found = [run for run in known_runs if run.scheduled_for >= slots[0]]
    if job.schedule_type != ScheduleType.INTERVAL:
        wanted = set(slots)
        return {run.scheduled_for: run for run in found if run.scheduled_for in wanted}
    every = timedelta(seconds=job.every_seconds)
    by_slot = {}
    for run in found:
        k = int((run.scheduled_for - slots[0]) / every)
        if 0 <= k < len(slots):
            by_slot.setdefault(slots[k], run)
    return by_slot


def backfill(job, start, end, user=None, dry_run=False, now=None, runs_left=None, params=None):
    """Create (or, with ``dry_run``, only list) the runs of the job's slots in [start, end); none
    when there would be more than ``runs_left`` (the user's backfill quota, None: no limit). Each
    run gets ``params`` (resolved values of the job's parameters; None: the defaults)."""
    now = now or timezone.now()
    slots = check_range(job, start, end, settings.JOBS_BACKFILL_MAX_SLOTS, now=now, past_only=True)
    found = Backfill(slots=slots)
    with transaction.atomic():
        # The slot report's matching: an interval job's run counts for the interval it falls in,
        # since resuming or editing the job moves its grid (the uniqueness of (job, time) alone
        # would let a backfill run such an interval again).
        found.existing = {slot: run.pk for slot, run in runs_by_slot(job, slots, end).items()} if slots else {}
        if dry_run or not found.missing:
            return found
        if runs_left is not None and len(found.missing) > runs_left:
            raise ValidationError({"end": (
                f"The range would create {len(found.missing)} runs; you may create {runs_left} more by backfill "
                f"today (JOBS_MAX_BACKFILL_RUNS_PER_DAY: {settings.JOBS_MAX_BACKFILL_RUNS_PER_DAY} in any 24 "
                "hours). Make the range shorter, or ask an administrator.")})
        rows = [(job, slot, RunStatus.QUEUED, "", None) for slot in found.missing]
        created = lifecycle.create_runs(rows, now, trigger=RunTrigger.BACKFILL, user=user, params=params)
        found.created = [run_id for run_id, *_ in created]
        lifecycle.publish_on_commit([(run_id, 1, job) for run_id in found.created])
    return found
