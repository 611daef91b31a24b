"""Backfill: create the runs of every slot of a job in a past time range.

Runs go through the scheduler's own insert (``dispatch.insert_runs``, ON CONFLICT DO NOTHING on one
run per slot), so a slot that already has a run, whatever became of it, is left alone and a
backfill is safe to repeat. Backfilled runs have the trigger ``backfill``: the start deadline,
the overlap policy and jitter, which are about the live schedule, do not apply to them.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from . import runs
from .dispatch import insert_runs
from .models import JobRun, RunStatus, RunTrigger, ScheduleType


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


def backfill(job, start, end, user=None, dry_run=False, now=None):
    """Create (or, with ``dry_run``, only list) the runs of the job's slots in [start, end)."""
    now = now or timezone.now()
    slots = check_range(job, start, end, settings.JOBS_BACKFILL_MAX_SLOTS, now=now, past_only=True)
    found = Backfill(slots=slots)
    with transaction.atomic():
        # Matched in Python, not with scheduled_for IN (...): on SQLite the scheduler's raw inserts
        # store times as text with an offset, which an equality lookup does not match.
        wanted = set(slots)
        taken = (JobRun.objects.filter(job=job, scheduled_for__gte=start, scheduled_for__lt=end)
                 .values_list("scheduled_for", "pk") if slots else [])
        found.existing = {slot: pk for slot, pk in taken if slot in wanted}
        if dry_run or not found.missing:
            return found
        rows = [(job, slot, RunStatus.QUEUED, "", None) for slot in found.missing]
        created = insert_runs(rows, now, trigger=RunTrigger.BACKFILL, user=user)
        found.created = [run_id for run_id, _job_id, _status in created]
        runs.publish_many_on_commit([(run_id, 1, job) for run_id in found.created])
    return found
