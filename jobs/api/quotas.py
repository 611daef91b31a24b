"""``GET, POST /api/quotas/`` and ``GET, PATCH, PUT /api/quotas/<id>/``: the quotas of a team (a Django
group, ``jobs.models.TeamQuota``). Staff read and set every team's (``jobs.actions.quotas``, which
writes the audit entry); anyone else reads their own teams'."""

from django.contrib.auth.models import Group
from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from ..actions import quotas as actions
from ..models import TeamQuota
from ..schemas.owned import GroupField
from .views import ApiViewSet


class TeamQuotaSerializer(serializers.ModelSerializer):
    team = GroupField(source="group", slug_field="name", queryset=Group.objects.all(),
                      help_text="The team: a group's name.")

    class Meta:
        model = TeamQuota
        fields = ["id", "team", *actions.TEAM_FIELDS, "updated_at"]
        read_only_fields = ["updated_at"]

    def save(self, **kwargs):
        raise NotImplementedError("A team's quotas are saved by jobs.actions.quotas, which checks who may and writes "
                                  "the audit entry: pass it the validated data.")


@extend_schema_view(
    list=extend_schema(description="The teams' quotas: every team's for staff, your own teams' for anyone else. "
                                   "An empty quota is no bound for the team (each member keeps their own)."),
    create=extend_schema(description="Set a team's quotas (staff only)."),
    retrieve=extend_schema(description="One team's quotas."),
    partial_update=extend_schema(description="Change some of a team's quotas (staff only)."),
    update=extend_schema(description="Replace a team's quotas (staff only)."),
)
class TeamQuotaViewSet(ApiViewSet, mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = TeamQuotaSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TeamQuota.objects.none()
        return actions.visible_team_quotas(self.request.user)

    def perform_create(self, serializer):
        serializer.instance = actions.save_team_quota(self.actor, TeamQuota(**serializer.validated_data))

    @transaction.atomic
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        serializer.instance = actions.save_team_quota(self.actor, serializer.instance, dict(serializer.validated_data))
