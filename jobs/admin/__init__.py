"""The Django admin (its autodiscovery imports ``jobs.admin``): jobs and their runs (``jobs.py``, with
the job's form, ``forms.py``), limits shared across jobs (``limits.py``), the calendars
(``calendars.py``), teams' quotas, maintenance windows and ping keys (below) and django-celery-beat's periodic tasks with a permission
on each action (``beat.py``). The resources declared once (``jobs.resources``) are admins of
``through_actions.ResourceAdmin``."""

from django.contrib import admin, messages

from audit.models import Source

from ..actions import ping_keys
from ..actions.jobs import Actor
from ..actions.quotas import TEAM_FIELDS
from ..models import TeamPingKey
from ..resources import QUOTAS, WINDOWS
from . import beat, calendars, jobs, limits  # noqa: F401  (registering is importing)
from .through_actions import register

register(QUOTAS, fields=("group", *TEAM_FIELDS), list_select_related=("group",))
register(WINDOWS, fields=(*WINDOWS.file.fields, "owner"), list_filter=("mode",))


@admin.register(TeamPingKey)
class TeamPingKeyAdmin(admin.ModelAdmin):
    """The teams' ping keys, read-only: a key is made and regenerated through ``jobs.actions.ping_keys``
    (its audit entry), here by the action, as its team's members do on their ping keys page."""

    list_display = ("group", "made_at")
    list_select_related = ("group",)
    fields = readonly_fields = ("group", "key", "made_at")
    actions = ["make_new_keys"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Make a new key (the old slug ping URLs end)", permissions=["change"])
    def make_new_keys(self, request, queryset):
        actor = Actor.of_request(request, Source.ADMIN)
        for row in queryset.select_related("group"):
            ping_keys.regenerate(actor, row.group)
        self.message_user(request, f"{queryset.count()} new ping key(s) made.", messages.SUCCESS)
