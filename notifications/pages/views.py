"""The notification channels page: staff only, since channels serve everyone's jobs."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from jobs.pages.views import page

from ..models import Channel
from ..sending import send_test_notification


def staff_only(request):
    if not request.user.is_staff:
        raise Http404("No such page.")


@login_required
def channel_list(request):
    staff_only(request)
    channels = Channel.objects.order_by("name")
    return page(request, "pages/channels.html", {"channels": channels}, "channels")


@login_required
@require_POST
def channel_test(request, pk):
    staff_only(request)
    sent, text = send_test_notification(get_object_or_404(Channel, pk=pk))
    (messages.success if sent else messages.error)(request, text)
    return redirect("notification-pages:channels")
