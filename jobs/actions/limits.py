"""What a person does to a limit (``jobs.models.Limit``), one function per action: create, change,
delete. Every interface calls these (the admin, the pages, the API, ``jobs apply``) with a
``jobs.actions.jobs.Actor``; each checks who may, makes the change and writes its audit entry
(subject "limit"), in one transaction.

A limit holds back the runs of every job that names it, whoever owns them: staff change limits
(and the command line, which acts as the operator); everyone logged in may read them, to see what
their runs wait for. A limit that jobs name is neither deleted nor renamed: those jobs would run
unlimited, or wait for a key that no longer exists.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from audit import trail
from audit.models import Action, Subject

from .. import lifecycle
from ..models import Job, Limit
from . import permissions
from .jobs import ActionError

EDITABLE = ("key", "max_running", "max_starts_per_minute", "description")
STAFF_ONLY = "Only staff may create, change or delete limits: a limit holds back every job that names it."


def may_edit(actor):
    return actor.user is None or permissions.sees_everything(actor.user)


def _check(actor):
    if not may_edit(actor):
        raise ActionError(STAFF_ONLY, ActionError.FORBIDDEN)


def snapshot(limit):
    return {name: getattr(limit, name) for name in EDITABLE}


def _diff(before, after):
    before, after = before or {}, after or {}
    return {name: [before.get(name), after.get(name)] for name in EDITABLE if before.get(name) != after.get(name)}


def _record(actor, name, action, changes, detail=""):
    trail.record_about(Subject.LIMIT, name, action, actor.source, actor_name=actor.name, user=actor.user,
                       address=actor.address, changes=changes, detail=detail)


def _saved(limit, update=False):
    try:
        limit.full_clean()
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None
    # A change writes only what a person edits: the claim writes the row's recent starts meanwhile.
    limit.save(update_fields=[*EDITABLE, "updated_at"] if update else None)
    return limit


def named_by(key, count=5):
    """Names of (some of) the jobs that name ``key``."""
    return list(Job.objects.filter(limit_key=key).order_by("name").values_list("name", flat=True)[:count])


def _in_use(key, doing):
    names = named_by(key)
    if names:
        raise ActionError(f"The limit {key} is named by the job(s) {', '.join(names)}: change their limit_key "
                          f"before you {doing} it.", ActionError.CONFLICT)


def create_limit(actor, limit, detail=""):
    _check(actor)
    with transaction.atomic():
        _saved(limit)
        _record(actor, limit.key, Action.CREATE, _diff(None, snapshot(limit)), detail)
    return limit


def edit_limit(actor, limit, values=None, detail=""):
    """Set ``values`` ({field: value}) on a saved limit and save it (``limit`` may carry its changes
    already, as the admin's form sets them); the entry's diff is against the row. Room a change
    makes is used at once (the waiting runs are woken when it commits)."""
    _check(actor)
    with transaction.atomic():
        stored = Limit.objects.select_for_update().get(pk=limit.pk)
        for name, value in (values or {}).items():
            setattr(limit, name, value)
        if limit.key != stored.key:
            _in_use(stored.key, "rename")
        _saved(limit, update=True)
        if changes := _diff(snapshot(stored), snapshot(limit)):
            _record(actor, limit.key, Action.CHANGE, changes, detail)
        transaction.on_commit(lambda: lifecycle.wake_waiting(limit.key))
    return limit


def delete_limit(actor, limit, detail=""):
    _check(actor)
    with transaction.atomic():
        _in_use(limit.key, "delete")
        _record(actor, limit.key, Action.DELETE, _diff(snapshot(limit), None), detail)
        limit.delete()
