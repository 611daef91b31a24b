"""Channels and rules in the API.

Channels follow the model permissions (``notifications.actions``): ``add_channel`` to create one,
``change_channel`` to change or test one, ``delete_channel`` to delete one, ``view_channel`` or
``change_channel`` to read its configuration (secrets masked) and errors; other users see a
directory (id, name, kind, enabled, shared) to point their rules at. A user who is not staff sees
only their own channels, their team's and the shared ones, and changes only their own and their
team's. Staff manage every rule; another user manages their own rules, their team's and the rules
of the jobs they can see (scope job), and sees only those. Every change goes through
``notifications.actions``, which writes the audit entry.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.actions.permissions import visible_jobs
from jobs.api.resources import ResourceViewSet
from jobs.api.views import ApiViewSet

from .. import actions
from ..models import Incident
from ..resources import CHANNELS, RULES
from ..schemas import ChannelSerializer
from .serializers import ChannelDirectorySerializer, ChannelTestSerializer

# The permission (notifications.<name>_channel) each action on channels needs.
CHANNEL_PERMISSIONS = {"create": "add", "update": "change", "partial_update": "change", "destroy": "delete",
                       "test": "change"}


class ChannelViewSet(ResourceViewSet):
    resource = CHANNELS

    def get_queryset(self):
        return super().get_queryset().order_by("name", "id")

    def get_serializer_class(self):
        if getattr(self, "swagger_fake_view", False) or actions.may(self.actor, "view"):
            return ChannelSerializer
        return ChannelDirectorySerializer

    def check_permissions(self, request):
        super().check_permissions(request)
        if self.action in CHANNEL_PERMISSIONS:
            actions.check(self.actor, CHANNEL_PERMISSIONS[self.action])

    @extend_schema(request=None, responses=ChannelTestSerializer,
                   description="Send a test notification through the channel now (notifications.change_channel). "
                               "`sent` says whether the channel took it; `detail` what happened.")
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        sent, text = actions.send_test(self.actor, self.get_object())
        return Response({"sent": sent, "detail": text})


class RuleViewSet(ResourceViewSet):
    resource = RULES

    def get_queryset(self):
        return super().get_queryset().select_related("channel", "job").order_by("id")


class IncidentSerializer(serializers.ModelSerializer):
    class Meta:
        model = Incident
        fields = ["id", "job", "run", "opened_at", "closed_at", "acknowledged_at", "acknowledged_by_name"]


class AcknowledgeView(ApiViewSet, APIView):
    """``POST /api/jobs/<id>/acknowledge/``: beside the jobs' own calls, since jobs know nothing of
    incidents."""

    @extend_schema(request=None, responses={200: IncidentSerializer},
                   description="Acknowledge the job's open incident: a person is on it. The channels told of it hear "
                               "it (PagerDuty's and Opsgenie's alert is acknowledged, the others get a message). 409 "
                               "when the job has no open incident, or it was acknowledged already.")
    def post(self, request, pk):
        job = get_object_or_404(visible_jobs(request.user), pk=pk)
        return Response(IncidentSerializer(actions.acknowledge(self.actor, job)).data)
