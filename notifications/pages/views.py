"""The notification channels page: for holders of notifications.view_channel or change_channel (a
test message needs change_channel); to anyone else it does not exist (404), as pages answer for
what a user may not see."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from audit.models import Source
from jobs.actions.jobs import Actor
from jobs.pages.views import page

from .. import actions, channels
from ..models import Channel


def actor_allowed(request, permission):
    actor = Actor.of_request(request, Source.PAGE)
    if not actions.may(actor, permission):
        raise Http404("No such page.")
    return actor


@login_required
def channel_list(request):
    actor = actor_allowed(request, "view")
    return page(request, "pages/channels.html", {"channels": Channel.objects.order_by("name"),
                                                 "kinds": channels.kinds().values(),
                                                 "may_test": actions.may(actor, "change")}, "channels")


@login_required
@require_POST
def channel_test(request, pk):
    actor = actor_allowed(request, "change")
    sent, text = actions.send_test(actor, get_object_or_404(Channel, pk=pk))
    (messages.success if sent else messages.error)(request, text)
    return redirect("notification-pages:channels")
