"""What the pages share: rendering a page of the site, the job's timezone and a slot's time in it,
the actor of a request, and the answer to an action refused."""

from functools import wraps
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.utils import dateformat

from audit.models import Source

from ..actions import jobs as actions
from ..models import ScheduleType


def page(request, template, context, section):
    context.update(section=section, flower_url=flower_url(request.user))
    return render(request, template, context)


def flower_url(user):
    """Flower's address for those who can open it (its basic auth is the operator's: staff), else ""."""
    return settings.FLOWER_URL.rstrip("/") if user.is_staff and settings.FLOWER_URL else ""


def counted(number, noun):
    """ "1 run", "3 runs": a count and its noun, in the plural but for one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def job_timezone(job):
    if job.schedule_type == ScheduleType.CRON and job.crontab:
        return str(job.crontab.timezone)
    return settings.TIME_ZONE


def slot_text(moment, tzname):
    """A slot in its job's timezone, "Sun 2027-10-31 02:00:00 CEST": the zone's abbreviation says
    which pass of a repeated hour it is (Django's "T" leaves it blank for such a wall-clock time)."""
    local = moment.astimezone(ZoneInfo(tzname))
    return f"{dateformat.format(local, 'D Y-m-d H:i:s')} {local.tzname()}"


def actor(request):
    return actions.Actor.of_request(request, Source.PAGE)


def may_act_on(request, job):
    """Whether to show the buttons that act on the job (the action checks again when used)."""
    return actions.may_act_on(actor(request), job)


def attempt(action, *args, **kwargs):
    """``action(*args, **kwargs)``: (what it returned, None), or (None, its ActionError) when it is
    refused for a reason the page shows. Refused as forbidden, it raises on, for
    ``refused_is_forbidden`` to answer 403."""
    try:
        return action(*args, **kwargs), None
    except actions.ActionError as exc:
        if exc.kind == actions.ActionError.FORBIDDEN:
            raise
        return None, exc


def refused_is_forbidden(view):
    """An action the view's user may not take answers 403, with the action's message; one over a
    quota of runs 429, naming the quota."""
    @wraps(view)
    def acting(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except actions.ActionError as exc:
            if exc.kind == actions.ActionError.FORBIDDEN:
                raise PermissionDenied(exc.message) from None
            if exc.kind == actions.ActionError.TOO_MANY:
                return too_many(request, exc)
            raise
    return acting


def too_many(request, exc):
    return render(request, "429.html", {"exception": exc.message}, status=429)
