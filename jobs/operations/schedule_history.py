"""The schedules a job had, read back from its audit trail: each change of its slots (its schedule,
its DST policy) records the old value beside the new, so the schedule in force at any moment is the
one the next such change replaced, or the job's current one after the last change. The on-time
report counts each stretch of time with the schedule that was in force then."""

import copy
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError

from audit.models import Action, AuditEntry

from ..definitions.jobs import as_scheduled
from .slot_report import SLOT_CHANGES

SLOT_FIELDS = ("schedule", "dst_skipped", "dst_repeated")


@dataclass
class Period:
    """[since, until) during which ``job`` (an unsaved copy as it was then) had its schedule;
    ``until`` None: still in force. ``current``: the job's own schedule, whose grid is its
    ``next_run_at``."""
    since: datetime
    until: datetime | None
    job: object
    current: bool


def changes_of(ids):
    """{job id: [(at, {field: [old, new]})]} of the changes of the jobs' slots, oldest first, in one query."""
    found = defaultdict(list)
    rows = (AuditEntry.objects.filter(SLOT_CHANGES, job_id__in=ids, action=Action.CHANGE).order_by("created_at", "id")
            .values_list("job_id", "created_at", *(f"changes__{name}" for name in SLOT_FIELDS)))
    for job_id, at, *values in rows:
        found[job_id].append((at, {name: value for name, value in zip(SLOT_FIELDS, values, strict=True)
                                   if isinstance(value, list) and len(value) == 2}))
    return found


def periods(job, changes=None):
    """The job's ``Period``s from its creation on, oldest first. ``changes``: ``changes_of``'s list
    for the job, read by the caller for many jobs at once, else read here."""
    if changes is None:
        changes = changes_of([job.pk]).get(job.pk, [])
    found, until, shown = [], None, job
    for at, diff in reversed(changes):
        found.append(Period(at, until, shown, shown is job))
        shown = _before(shown, diff)
        until = at
    found.append(Period(job.created_at, until, shown, shown is job))
    return [period for period in reversed(found) if period.job is not None]


def _before(job, diff):
    """The job as it was before ``diff``; None for a job that then had no schedule one can read back."""
    if job is None:
        return None
    earlier = copy.copy(job)
    earlier.pk = None  # never read the job's runs for it: it is a picture of the past
    for name in ("dst_skipped", "dst_repeated"):
        if name in diff:
            setattr(earlier, name, diff[name][0])
    if "schedule" not in diff:
        return earlier
    try:
        return as_scheduled(earlier, diff["schedule"][0])
    except (ValidationError, TypeError, ValueError):
        return None
