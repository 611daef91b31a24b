"""The notification channels page: for holders of notifications.view_channel or change_channel (a
test message needs change_channel, and a channel of theirs or their team's: staff any); to anyone
else it does not exist (404), as pages answer for what a user may not see. A user who is not staff
sees their own channels, their team's and the shared ones."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from audit.models import Source
from jobs.actions.jobs import Actor
from jobs.pages.views import page

from .. import actions, channels


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
