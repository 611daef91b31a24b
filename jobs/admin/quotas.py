"""Teams' quotas in the admin: each change goes through ``jobs.actions.quotas`` (staff only, and the
audit entry); a refused one comes back as a message."""

from django.contrib import admin

from ..actions import quotas as actions
from ..models import TeamQuota
from .through_actions import ThroughActions


@admin.register(TeamQuota)
class TeamQuotaAdmin(ThroughActions, admin.ModelAdmin):
    create = edit = staticmethod(actions.save_team_quota)
    delete = staticmethod(actions.delete_team_quota)
    list_display = ("group", *actions.TEAM_FIELDS, "updated_at")
    search_fields = ("group__name",)
    fields = ("group", *actions.TEAM_FIELDS)
    list_select_related = ("group",)
