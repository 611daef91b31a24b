"""What a person does to a maintenance window (``jobs.models.Window``), one function per action:
create, edit, delete. Every interface calls these (the admin, the pages, the API, ``jobs apply``);
each checks who may, makes the change and writes its audit entry (subject ``window``) in one
transaction.

A window is its maker's and, when given, their team's (``group``); staff may mark one ``shared``.
It names only jobs its maker may see: another job's id is refused as unknown, whether it exists or
not.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from audit import trail
from audit.models import Action, Subject

from ..models import Window
from . import owned, permissions
from .jobs import ActionError

EDITABLE = ("name", "description", "mode", "starts_at", "ends_at", "cron", "duration_seconds", "timezone", "jobs",
            "tags", "group", "shared")
STAFF_ONLY = "Only staff may change or delete a shared window; yours and your team's are yours to change."


def visible(user):
    """The windows ``user`` (None: the operator) sees."""
    return permissions.owned_or_shared(Window.objects.all(), user)


may_edit = owned.may_change


def snapshot(window):
    values = owned.snapshot(window, EDITABLE)
    for name in ("starts_at", "ends_at"):
        values[name] = values[name].isoformat() if values[name] else None
    return values


def _diff(before, after):
    return owned.diff(before, after, EDITABLE)


def _record(actor, window, action, changes, detail=""):
    trail.record_about(Subject.WINDOW, window.name, action, actor.source, actor_name=actor.name, user=actor.user,
                       address=actor.address, changes=changes, detail=detail)


def _check_jobs(actor, window, stored=None):
    """Refuse a job id the actor may not see (said the same way as one that does not exist); ids
    the stored window already names stay (their owner may have lost sight of them)."""
    kept = set(stored.jobs) if stored is not None else set()
    asked = [job_id for job_id in window.jobs if isinstance(job_id, int) and job_id not in kept]
    if not asked:
        return
    seen = set(permissions.visible_jobs(actor.user).filter(pk__in=asked).values_list("pk", flat=True))
    unknown = [job_id for job_id in asked if job_id not in seen]
    if unknown:
        raise ActionError(f"jobs: no job with the id {unknown[0]}.", ActionError.INVALID,
                          fields={"jobs": [f"No job with the id {unknown[0]}."]})


def _saved(actor, window, stored=None):
    try:
        window.full_clean()
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None
    _check_jobs(actor, window, stored)
    window.save()
    return window


def create(actor, window, detail=""):
    owned.check_ownership(actor, window)
    owned.claim(actor, window)
    with transaction.atomic():
        _saved(actor, window)
        _record(actor, window, Action.CREATE, _diff(None, snapshot(window)), detail)
    return window


def edit(actor, window, values=None, detail=""):
    with transaction.atomic():
        stored = owned.changing(actor, window, values, STAFF_ONLY)
        _saved(actor, window, stored)
        if changes := _diff(snapshot(stored), snapshot(window)):
            _record(actor, window, Action.CHANGE, changes, detail)
    return window


def delete(actor, window, detail=""):
    owned.check_change(actor, window, STAFF_ONLY)
    with transaction.atomic():
        _record(actor, window, Action.DELETE, _diff(snapshot(window), None), detail)
        window.delete()
