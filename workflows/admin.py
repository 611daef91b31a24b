"""Workflows in the admin: their graph (nodes and edges) and their runs with each step, to read.

A workflow's graph is defined through the API or ``manage.py jobs apply``, where it is checked as a
whole (cycles named); here it is shown, and the schedule, policy and owner can be changed, each
save and delete through ``workflows.actions`` (``workflows.resources``: which writes the audit entry)."""

from django.contrib import admin

from jobs.admin.jobs import ReadOnlyInline
from jobs.admin.through_actions import ResourceAdmin

from .models import WorkflowEdge, WorkflowNode, WorkflowRun, WorkflowStep
from .permissions import may_act_on
from .resources import WORKFLOWS


class NodeInline(ReadOnlyInline):
    model = WorkflowNode
    fields = ["job"]


class EdgeInline(ReadOnlyInline):
    model = WorkflowEdge
    fields = ["upstream", "downstream", "on_failure"]


@admin.register(WORKFLOWS.model)
class WorkflowAdmin(ResourceAdmin):
    resource = WORKFLOWS
    list_filter = ["enabled", "schedule_type"]
    fields = ["name", "description", "owner", "group", "enabled", "on_upstream_failure", "schedule_type",
              "crontab", "interval", "clocked", "next_run_at"]
    readonly_fields = ["schedule_type", "crontab", "interval", "clocked", "next_run_at"]
    raw_id_fields = ["owner"]
    inlines = [NodeInline, EdgeInline]

    # A workflow with command jobs runs them: read-only, and kept, without run_command_jobs.
    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and (obj is None or may_act_on(request.user, obj))

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (obj is None or may_act_on(request.user, obj))

    def deleted(self, queryset):
        return queryset.select_related("crontab", "interval", "clocked", "owner", "group")


class StepInline(ReadOnlyInline):
    model = WorkflowStep
    fields = ["job", "status", "run", "kept", "reason", "started_at", "finished_at"]


@admin.register(WorkflowRun)
class WorkflowRunAdmin(admin.ModelAdmin):
    list_display = ["id", "workflow", "status", "trigger", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    search_fields = ["workflow__name"]
    readonly_fields = ["workflow", "status", "trigger", "scheduled_for", "triggered_by", "rerun_of",
                       "cancel_requested", "created_at", "finished_at", "reason"]
    inlines = [StepInline]

    def has_add_permission(self, request):
        return False
