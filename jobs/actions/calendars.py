"""What a person does to a calendar, one function per action: create, edit (an ICS import is an
edit), delete. Every interface calls these (the admin, the pages, the API, ``jobs apply``); each
checks who may, makes the change, moves the next slot of the jobs that use the calendar, and writes
its audit entry (subject ``calendar``, named by the calendar) in one transaction.

Who may: a calendar is its maker's and, when given, their team's (``group``); staff may mark one
``shared``. A user sees, and names in their jobs' ``calendars``, their own, their team's and the
shared ones (``visible``); they change and delete their own and their team's. Staff (and the
operator on the command line) change any: a shared calendar's change moves the slots of every job
that uses it, whoever owns those jobs.
"""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from audit import trail
from audit.models import Action, Subject

from ..definitions import calendars as definitions
from ..models import Calendar, Job
from . import owned, permissions
from .jobs import ActionError

STAFF_ONLY = ("Only staff may change or delete a shared calendar; yours and your team's are yours to change, and "
              "everybody may name the shared ones in jobs.")
SHOWN_DATES = 10  # dates named in an entry's detail
OWNERSHIP = ("group", "shared")


def visible(user):
    """The calendars ``user`` (None: the operator) sees and may name in a job's ``calendars``."""
    return permissions.owned_or_shared(Calendar.objects.all(), user)


may_edit = owned.may_change


def snapshot(calendar):
    return {"name": calendar.name, "description": calendar.description, "country": calendar.country,
            "subdivision": calendar.subdivision, "dates": list(calendar.dates or []),
            "group": calendar.group.name if calendar.group_id else None, "shared": calendar.shared}


def diff(before, after):
    """{field: [old, new]}; the dates as their counts (a calendar may hold thousands), and the
    detail naming the dates added and removed."""
    before, after = before or {}, after or {}
    changes, detail = {}, []
    for name in ("name", "description", "country", "subdivision", *OWNERSHIP):
        if before.get(name) != after.get(name):
            changes[name] = [before.get(name), after.get(name)]
    old = {item["date"]: item.get("label", "") for item in before.get("dates") or []}
    new = {item["date"]: item.get("label", "") for item in after.get("dates") or []}
    if old != new:
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        relabelled = sorted(day for day in set(old) & set(new) if old[day] != new[day])
        changes["dates"] = [len(old), len(new)]
        for word, days in (("added", added), ("removed", removed), ("relabelled", relabelled)):
            if days:
                more = f" and {len(days) - SHOWN_DATES} more" if len(days) > SHOWN_DATES else ""
                detail.append(f"{word} {', '.join(days[:SHOWN_DATES])}{more}")
    return changes, "; ".join(detail)


def _record(actor, calendar, action, changes, detail=""):
    trail.record_about(Subject.CALENDAR, calendar.name, action, actor.source, actor_name=actor.name,
                       user=actor.user, address=actor.address, changes=changes, detail=detail)


def _saved(calendar):
    try:
        calendar.full_clean()
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None
    calendar.save()


def create(actor, calendar):
    """Save a new calendar: the actor's (the command line's: staff's), and their team's when
    ``group`` is given (one of the actor's groups)."""
    owned.check_ownership(actor, calendar)
    owned.claim(actor, calendar)
    with transaction.atomic():
        _saved(calendar)
        changes, detail = diff(None, snapshot(calendar))
        _record(actor, calendar, Action.CREATE, changes, detail)
        # A job may have named it before (as a job's edit, from the web server's clock: Job.first_slot).
        definitions.replan_jobs_using([calendar.name], timezone.now())
    return calendar


def edit(actor, calendar, values=None):
    """Set ``values`` ({field: value}) on a saved calendar and save it (``calendar`` may carry its
    changes already, as the admin's form sets them). A calendar used by jobs keeps its name (they
    name it): renaming one is refused."""
    with transaction.atomic():
        stored = owned.changing(actor, calendar, values, STAFF_ONLY)
        if calendar.name != stored.name and (users := definitions.jobs_using(stored.name)):
            raise ActionError(f"The calendar {stored.name} is used by {len(users)} job(s): a job names its calendars, "
                              "so it cannot be renamed. Make a new calendar instead.", ActionError.CONFLICT,
                              fields={"name": ["Used by jobs: cannot be renamed."]})
        _saved(calendar)
        changes, detail = diff(snapshot(stored), snapshot(calendar))
        if changes:
            _record(actor, calendar, Action.CHANGE, changes, detail)
            definitions.replan_jobs_using([calendar.name], timezone.now())
    return calendar


def import_ics(actor, calendar, data, replace=False):
    """Add the dates of an ICS file (``data``, bytes or text) to the calendar, or with ``replace``
    make them its only typed-in dates. A refused file changes nothing."""
    owned.check_change(actor, calendar, STAFF_ONLY)
    try:
        found = definitions.dates_from_ics(data)
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None
    dates = found if replace else [*calendar.dates, *found]
    return edit(actor, calendar, {"dates": dates})


def delete(actor, calendar):
    owned.check_change(actor, calendar, STAFF_ONLY)
    with transaction.atomic():
        users = definitions.jobs_using(calendar.name)
        if users:
            seen = set(permissions.owned_or_shared(Job.objects.filter(pk__in=[job.pk for job in users]), actor.user)
                       .values_list("pk", flat=True))
            names = sorted(job.name for job in users if job.pk in seen)
            hidden = len(users) - len(names)
            more = (f" and {len(names) - 10} more" if len(names) > 10 else "") + \
                (f" and {hidden} job(s) of others" if hidden else "")
            raise ActionError(f"The calendar {calendar.name} is used by the job(s) {', '.join(names[:10])}{more}: "
                              "take it out of them first.", ActionError.CONFLICT)
        changes, detail = diff(snapshot(calendar), None)
        _record(actor, calendar, Action.DELETE, changes, detail)
        calendar.delete()
