"""What a person does to a limit (``jobs.models.Limit``), one function per action: create, change,
delete. Every interface calls these (the admin, the pages, the API, ``jobs apply``) with a
``jobs.actions.jobs.Actor``; each checks who may, makes the change and writes its audit entry
(subject "limit"), in one transaction.

A limit is its maker's and, when given, their team's (``group``); staff may mark one ``shared``.
A user sees, and names in their jobs' ``limit_key``, their own limits, their team's and the
shared ones (``visible``); they change and delete their own and their team's, staff any (and the
command line, which acts as the operator). A limit that jobs name is neither deleted nor renamed:
those jobs would run unlimited, or wait for a key that no longer exists.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from audit import trail
from audit.models import Action, Subject

from .. import lifecycle
from ..models import Job, Limit
from . import owned, permissions
from .jobs import ActionError

EDITABLE = ("key", "max_running", "max_starts_per_minute", "description", "group", "shared")
STAFF_ONLY = ("Only staff may change or delete a shared limit (it holds back every job that names it); "
              "yours and your team's are yours to change.")


def visible(user):
    """The limits ``user`` (None: the operator) sees and may name in a job's ``limit_key``."""
    return permissions.owned_or_shared(Limit.objects.all(), user)


may_edit = owned.may_change


def snapshot(limit):
    return owned.snapshot(limit, EDITABLE)


def _diff(before, after):
    return owned.diff(before, after, EDITABLE)


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


def named_by(key, count=5, user=None):
    """Names of (some of) the jobs that name ``key``, of those ``user`` (None: anyone) may see."""
    jobs = Job.objects.filter(limit_key=key)
    if user is not None:
        jobs = permissions.owned_or_shared(jobs, user)
    return list(jobs.order_by("name").values_list("name", flat=True)[:count])


def _in_use(actor, key, doing):
    jobs = Job.objects.filter(limit_key=key)
    count = jobs.count()
    if count:
        seen = permissions.owned_or_shared(jobs, actor.user)
        names = list(seen.order_by("name").values_list("name", flat=True)[:5])
        hidden = count - seen.count()
        shown = ", ".join(names + ([f"{hidden} job(s) of others"] if hidden else []))
        raise ActionError(f"The limit {key} is named by the job(s) {shown}: change their limit_key "
                          f"before you {doing} it.", ActionError.CONFLICT)


def create_limit(actor, limit, detail=""):
    """Save a new limit: the actor's (the command line's: staff's), and their team's when ``group``
    is given (one of the actor's groups)."""
    owned.check_ownership(actor, limit)
    owned.claim(actor, limit)
    with transaction.atomic():
        _saved(limit)
        _record(actor, limit.key, Action.CREATE, _diff(None, snapshot(limit)), detail)
    return limit


def edit_limit(actor, limit, values=None, detail=""):
    """Set ``values`` ({field: value}) on a saved limit and save it (``limit`` may carry its changes
    already, as the admin's form sets them); the entry's diff is against the row. Room a change
    makes is used at once (the waiting runs are woken when it commits)."""
    with transaction.atomic():
        stored = owned.changing(actor, limit, values, STAFF_ONLY)
        if limit.key != stored.key:
            _in_use(actor, stored.key, "rename")
        _saved(limit, update=True)
        if changes := _diff(snapshot(stored), snapshot(limit)):
            _record(actor, limit.key, Action.CHANGE, changes, detail)
        transaction.on_commit(lambda: lifecycle.wake_waiting(limit.key))
    return limit


def delete_limit(actor, limit, detail=""):
    owned.check_change(actor, limit, STAFF_ONLY)
    with transaction.atomic():
        _in_use(actor, limit.key, "delete")
        _record(actor, limit.key, Action.DELETE, _diff(snapshot(limit), None), detail)
        limit.delete()
