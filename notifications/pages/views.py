"""The notification channels page, and acknowledging a job's incident (below).

The channels page is for holders of notifications.view_channel or change_channel (a test message
needs change_channel, and a channel of theirs or their team's: staff any); to anyone else it does
not exist (404), as pages answer for what a user may not see. A user who is not staff sees their
own channels, their team's and the shared ones."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_http_methods, require_POST

from audit.models import Source
from jobs.actions.jobs import Actor
from jobs.actions.permissions import visible_jobs
from jobs.pages.views import page

from .. import actions, channels, incidents
from ..models import Incident


def actor_allowed(request, permission):
    actor = Actor.of_request(request, Source.PAGE)
    if not actions.may(actor, permission):
        raise Http404("No such page.")
    return actor


@login_required
def channel_list(request):
    actor = actor_allowed(request, "view")
    shown = list(actions.visible_channels(request.user).order_by("name"))
    for channel in shown:
        channel.may_test = actions.may(actor, "change") and actions.may_change_channel(actor, channel)
    return page(request, "pages/channels.html", {"channels": shown,
                                                 "kinds": channels.kinds().values(),
                                                 "may_test": actions.may(actor, "change"),
                                                 "may_add": actions.may(actor, "add")}, "channels")


@login_required
@require_POST
def channel_test(request, pk):
    actor = actor_allowed(request, "change")
    try:
        sent, text = actions.send_test(actor, get_object_or_404(actions.visible_channels(request.user), pk=pk))
    except actions.ActionError as exc:
        if exc.kind == actions.ActionError.FORBIDDEN:
            raise PermissionDenied(exc.message) from None
        sent, text = False, exc.message  # over NOTIFY_TEST_SENDS_PER_MINUTE: said on the page
    (messages.success if sent else messages.error)(request, text)
    return redirect("notification-pages:channels")


# --- a job's incident: acknowledged from the job page, or through the signed link of an alert


def acknowledged(request, job, incident_id=None):
    """Acknowledge and go back to the job's page, which says what happened."""
    try:
        actions.acknowledge(Actor.of_request(request, Source.PAGE), job, incident_id)
    except actions.ActionError as exc:
        if exc.kind == actions.ActionError.FORBIDDEN:
            raise PermissionDenied(exc.message) from None
        messages.error(request, exc.message)
    else:
        messages.success(request, f"You acknowledged {job.name}'s incident; the channels told of it hear so.")
    return redirect("pages:job", pk=job.pk)


@login_required
@require_POST
def job_acknowledge(request, pk):
    return acknowledged(request, get_object_or_404(visible_jobs(request.user), pk=pk))


@login_required
@require_http_methods(["GET", "POST"])
def acknowledge_link(request, token):
    """The link an alert carries: its token names one incident (signed, so it cannot be made up);
    the incident's job must be one the user sees (else 404, as any page answers). GET asks, POST
    acknowledges: a link opened by a mail scanner changes nothing."""
    incident = get_object_or_404(Incident.objects.select_related("job"), pk=incidents.incident_id(token) or 0,
                                 job__in=visible_jobs(request.user))
    if request.method == "POST":
        return acknowledged(request, incident.job, incident.pk)
    return page(request, "notifications/acknowledge.html", {"incident": incident, "job": incident.job}, "jobs")
