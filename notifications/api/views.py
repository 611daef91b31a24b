"""Channels and rules in the API.

Channels serve everyone's jobs, so only staff create, change, delete or test them and read their
configuration; other users see a directory (id, name, kind, enabled) to point their rules at.
Staff manage every rule; another user manages the rules of the jobs they can see (scope job),
and sees only those.
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from jobs.api.views import ApiViewSet, int_param
from jobs.permissions import sees_everything, visible_jobs

from .. import channel_secrets
from ..models import Channel, Rule, RuleScope
from ..sending import send_test_notification
from .serializers import ChannelDirectorySerializer, ChannelSerializer, ChannelTestSerializer, RuleSerializer

STAFF_ONLY = "Only staff may create, change, delete or test channels: they serve everyone's jobs."


@extend_schema_view(
    list=extend_schema(description="Every channel. Staff see each one's configuration (secrets masked) and "
                                   "errors; other users see id, name, kind and enabled."),
    create=extend_schema(description="Add a channel (staff)."),
    update=extend_schema(description="Replace a channel (staff). A secret sent as the mask keeps its stored value."),
    partial_update=extend_schema(description="Change a channel (staff). Without `config` the configuration is "
                                             "kept; a secret sent as the mask keeps its stored value. Enabling a "
                                             "channel clears its `disabled_reason`."),
    destroy=extend_schema(description="Delete a channel with its rules and deliveries (staff)."),
)
class ChannelViewSet(ApiViewSet, viewsets.ModelViewSet):
    queryset = Channel.objects.order_by("name", "id")

    def get_serializer_class(self):
        if getattr(self, "swagger_fake_view", False) or sees_everything(self.request.user):
            return ChannelSerializer
        return ChannelDirectorySerializer

    def check_permissions(self, request):
        super().check_permissions(request)
        if self.action not in ("list", "retrieve") and not sees_everything(request.user):
            raise PermissionDenied(STAFF_ONLY)

    @extend_schema(request=None, responses=ChannelTestSerializer,
                   description="Send a test notification through the channel now (staff). `sent` says whether "
                               "the channel took it; `detail` what happened.")
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        channel = self.get_object()
        sent, text = send_test_notification(channel)
        return Response({"sent": sent, "detail": channel_secrets.redacted(channel.kind, channel.config, text)})


@extend_schema_view(
    list=extend_schema(
        description="Rules: all of them for staff; for other users, the rules of the jobs they can see.",
        parameters=[OpenApiParameter("channel", OpenApiTypes.INT, description="A channel's id."),
                    OpenApiParameter("job", OpenApiTypes.INT, description="A job's id.")],
    ),
    create=extend_schema(description="Add a rule. Users who are not staff add rules for one of their jobs "
                                     "(scope job) on an existing channel."),
)
class RuleViewSet(ApiViewSet, viewsets.ModelViewSet):
    serializer_class = RuleSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Rule.objects.none()
        rules = Rule.objects.select_related("channel", "job").order_by("id")
        user = self.request.user
        if not sees_everything(user):
            rules = rules.filter(scope=RuleScope.JOB, job__in=visible_jobs(user))
        params = self.request.query_params
        if "channel" in params:
            rules = rules.filter(channel_id=int_param(params, "channel"))
        if "job" in params:
            rules = rules.filter(job_id=int_param(params, "job"))
        return rules
