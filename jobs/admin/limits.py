"""Limits shared across jobs in the admin: each change goes through ``jobs.actions.limits`` (who
may, and the audit entry); a refused one comes back as a message."""

from django.contrib import admin

from ..actions import limits as actions
from ..lifecycle import limits
from ..models import Job, Limit
from .jobs import refused_as_message
from .through_actions import ThroughActions


@admin.register(Limit)
class LimitAdmin(ThroughActions, admin.ModelAdmin):
    create, edit, delete = (staticmethod(actions.create_limit), staticmethod(actions.edit_limit),
                            staticmethod(actions.delete_limit))
    list_display = ("key", "max_running", "max_starts_per_minute", "running", "waiting", "jobs", "owner", "group",
                    "shared")
    search_fields = ("key", "description")
    fields = (*actions.EDITABLE, "owner")
    readonly_fields = ("owner",)

    def get_queryset(self, request):
        return actions.visible(request.user)

    @admin.display(description="running now")
    def running(self, limit):
        return limits.running_count(limit.key)

    @admin.display(description="waiting now")
    def waiting(self, limit):
        return limits.waiting(limit.key).count()

    @admin.display(description="jobs naming it")
    def jobs(self, limit):
        return Job.objects.filter(limit_key=limit.key).count()


    def changeform_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changeform_view, request, *args, **kwargs)

    def delete_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().delete_view, request, *args, **kwargs)

    def changelist_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changelist_view, request, *args, **kwargs)
