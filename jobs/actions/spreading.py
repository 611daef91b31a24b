"""Spreading a peak: set one ``spread`` on many jobs at once, as the forecast suggests.

Staff only: moving other people's jobs is an operator's decision. The jobs change in one
transaction, each job's next slot following its new offset, and each gets its own audit entry (its
history shows the change, as an edit would), all with the same detail naming the action.
"""

from django.db import transaction
from django.utils import timezone

from audit import trail
from audit.models import Action

from ..definitions import jobs as definitions
from ..models import Job
from ..timing.spread import MAX_SPREAD_SECONDS, offset_seconds
from . import permissions
from .jobs import COMMAND_JOBS_DENIED, ActionError, may_act_on
from .snapshot import diff, snapshot

MAX_JOBS = 100_000
MAX_ID = 2**63 - 1  # a job id is a bigint: a larger number is no job (and SQLite could not even compare it)


def apply_spread(actor, job_ids, seconds, detail="spread from the forecast"):
    """Set ``spread`` to ``seconds`` on the jobs ``job_ids``; returns how many changed."""
    if actor.user is not None and not permissions.sees_everything(actor.user):
        raise ActionError("Only staff may spread jobs from the forecast.", ActionError.FORBIDDEN)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 <= seconds <= MAX_SPREAD_SECONDS:
        raise ActionError("Invalid spread.", fields={"spread": [f"Must be whole seconds from 0 to {MAX_SPREAD_SECONDS}."]})
    if not isinstance(job_ids, list) or not job_ids or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= MAX_ID for i in job_ids):
        raise ActionError("Invalid jobs.", fields={"jobs": ["Must be a non-empty list of job ids."]})
    if len(job_ids) > MAX_JOBS:
        raise ActionError("Too many jobs.", fields={"jobs": [f"At most {MAX_JOBS} jobs at once."]})
    with transaction.atomic():
        stored = (Job.objects.select_for_update(of=("self",))
                  .select_related("crontab", "interval", "clocked", "owner", "group").in_bulk(job_ids))
        if missing := sorted(set(job_ids) - set(stored)):
            raise ActionError("Unknown jobs.", fields={"jobs": [f"No job with id {', '.join(map(str, missing[:10]))}."]})
        if any(not may_act_on(actor, job) for job in stored.values()):
            raise ActionError(COMMAND_JOBS_DENIED, ActionError.FORBIDDEN, fields={"jobs": [COMMAND_JOBS_DENIED]})
        now, changed, entries = timezone.now(), [], []
        for job_id in sorted(stored):
            before = stored[job_id]
            job = _copy(before)
            job.spread = seconds
            job.spread_offset_seconds = offset_seconds(job.name, seconds)
            definitions.follow_spread(job, before)
            if changes := diff(snapshot(before), snapshot(job)):
                job.updated_at = now
                changed.append(job)
                entries.append(trail.entry_of(job, Action.CHANGE, actor.source, user=actor.user, actor_name=actor.name,
                                              address=actor.address, changes=changes,
                                              detail=f"{detail} ({len(stored)} jobs)"))
        Job.objects.bulk_update(changed, ["spread", "spread_offset_seconds", "next_run_at", "updated_at"], batch_size=1000)
        trail.record_many(entries)
    return len(changed)


def _copy(job):
    """An unsaved copy of ``job`` with its related rows, to change beside the row as it was."""
    copy = Job(**{f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields})
    for name in ("crontab", "interval", "clocked", "owner", "group"):
        if getattr(job, f"{name}_id") is not None:
            setattr(copy, name, getattr(job, name))
    copy._state.adding = False
    return copy
