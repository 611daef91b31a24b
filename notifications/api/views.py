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

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from jobs.api.views import ApiViewSet, int_param

from .. import actions
from ..models import Channel, Rule
from ..schemas import ChannelSerializer
from .serializers import ChannelDirectorySerializer, ChannelTestSerializer, RuleSerializer

# The permission (notifications.<name>_channel) each action on channels needs.
CHANNEL_PERMISSIONS = {"create": "add", "update": "change", "partial_update": "change", "destroy": "delete",
                       "test": "change"}


@extend_schema_view(
    list=extend_schema(description="Every channel. Holders of notifications.view_channel or change_channel see "
                                   "each one's configuration (secrets masked) and errors; other users see id, "
                                   "name, kind and enabled."),
    create=extend_schema(description="Add a channel (notifications.add_channel)."),
    update=extend_schema(description="Replace a channel (notifications.change_channel). A secret sent as the "
                                     "mask keeps its stored value."),
    partial_update=extend_schema(description="Change a channel (notifications.change_channel). Without `config` "
                                             "the configuration is kept; a secret sent as the mask keeps its "
                                             "stored value. Enabling a channel clears its `disabled_reason`."),
    destroy=extend_schema(description="Delete a channel with its rules and deliveries "
                                      "(notifications.delete_channel)."),
)
class ChannelViewSet(ApiViewSet, viewsets.ModelViewSet):
    queryset = Channel.objects.none()  # the schema's model; each request reads get_queryset

    def get_queryset(self):
        return actions.visible_channels(self.request.user).order_by("name", "id")

    def get_serializer_class(self):
        if getattr(self, "swagger_fake_view", False) or actions.may(self.actor, "view"):
            return ChannelSerializer
        return ChannelDirectorySerializer

    def check_permissions(self, request):
        super().check_permissions(request)
        if self.action in CHANNEL_PERMISSIONS:
            actions.check(self.actor, CHANNEL_PERMISSIONS[self.action])

    def perform_create(self, serializer):
        serializer.instance = actions.create_channel(self.actor, Channel(**serializer.validated_data))

    def perform_update(self, serializer):
        actions.edit_channel(self.actor, serializer.instance, serializer.validated_data)

    def perform_destroy(self, channel):
        actions.delete_channel(self.actor, channel)

    @extend_schema(request=None, responses=ChannelTestSerializer,
                   description="Send a test notification through the channel now (notifications.change_channel). "
                               "`sent` says whether the channel took it; `detail` what happened.")
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        sent, text = actions.send_test(self.actor, self.get_object())
        return Response({"sent": sent, "detail": text})


@extend_schema_view(
    list=extend_schema(
        description="Rules: all of them for staff; for other users, their own, their team's and the rules of the jobs "
                    "they can see. `paused_reason` says why the service paused one (a permanent error of a channel "
                    "not the rule owner's, caused by what the rule sent): fix it, then set `enabled` again.",
        parameters=[OpenApiParameter("channel", OpenApiTypes.INT, description="A channel's id."),
                    OpenApiParameter("job", OpenApiTypes.INT, description="A job's id.")],
    ),
    create=extend_schema(description="Add a rule (yours; your team's with `group`). Users who are not staff add "
                                     "rules for one of their jobs (scope job) on a channel of theirs, their team's, "
                                     "or a shared one."),
)
class RuleViewSet(ApiViewSet, viewsets.ModelViewSet):
    serializer_class = RuleSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Rule.objects.none()
        rules = actions.visible_rules(self.request.user).select_related("channel", "job").order_by("id")
        params = self.request.query_params
        if "channel" in params:
            rules = rules.filter(channel_id=int_param(params, "channel"))
        if "job" in params:
            rules = rules.filter(job_id=int_param(params, "job"))
        return rules

    def perform_create(self, serializer):
        serializer.instance = actions.create_rule(self.actor, Rule(**serializer.validated_data))

    def perform_update(self, serializer):
        actions.edit_rule(self.actor, serializer.instance, serializer.validated_data)

    def perform_destroy(self, rule):
        actions.delete_rule(self.actor, rule)
