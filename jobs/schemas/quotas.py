"""A team's quotas (``jobs.models.TeamQuota``) as the API answers and checks them
(``TeamQuotaSerializer``): the team named by its group's name."""

from django.contrib.auth.models import Group
from rest_framework import serializers

from ..actions import quotas as actions
from ..models import TeamQuota
from .owned import GroupField


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
