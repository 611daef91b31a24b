"""JSON shapes of workflows and workflow runs, below the API (``workflows.resources`` names the
workflow's). A workflow's graph is ``nodes`` (job names) and
``edges`` ({"from": job, "to": job, "on_failure": "skip"|"run"}); it is checked by
``definitions.parse_graph`` (cycles named) and saved by ``workflows.actions`` (which writes the audit entry)."""

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from jobs.actions.permissions import guarded_kinds, may_run_command_jobs, sees_everything, visible_jobs
from jobs.schemas.jobs import ScheduleField
from jobs.schemas.owned import GroupField

from . import definitions
from .models import FailurePolicy, Workflow, WorkflowRun, WorkflowStep


class EdgeSerializer(serializers.Serializer):
    locals()["from"] = serializers.CharField(max_length=200, help_text="The upstream job's name.")
    to = serializers.CharField(max_length=200, help_text="The downstream job's name.")
    on_failure = serializers.ChoiceField(
        choices=["", *FailurePolicy.values], required=False, allow_blank=True,
        help_text="What a failed upstream means for the downstream job; blank: the workflow's policy.")


class WorkflowRunSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = WorkflowRun
        fields = ["id", "status", "trigger", "scheduled_for", "created_at", "finished_at"]


class WorkflowSerializer(serializers.ModelSerializer):
    schedule = ScheduleField()
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    group = GroupField(slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True,
                       help_text="A group of yours whose members may also see and run the workflow.")
    nodes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, source="node_names",
                                  help_text="The names of the workflow's jobs (each at most once).")
    edges = EdgeSerializer(many=True, required=False, source="edge_dicts",
                           help_text="Dependencies: 'to' starts once 'from' (and its other upstreams) succeeded.")
    params = serializers.DictField(
        child=serializers.DictField(), required=False, source="step_params",
        help_text="Values of the parameters of a step's job, by job name: {\"report\": {\"day\": \"2026-11-01\"}}; "
                  "each checked as a run's values are; the job's defaults fill the rest when the step starts.")
    last_run = serializers.SerializerMethodField()

    class Meta:
        model = Workflow
        fields = ["id", "name", "description", "schedule", "enabled", "on_upstream_failure", "nodes", "edges", "params",
                  "next_run_at", "last_run", "owner", "group", "version", "created_at", "updated_at"]
        read_only_fields = ["next_run_at", "version", "created_at", "updated_at"]
        extra_kwargs = {"version": {"help_text": "Its current version (GET /api/workflows/<id>/versions/); 0: not "
                                                 "saved since versions were kept."}}

    def get_last_run(self, workflow) -> WorkflowRunSummarySerializer(allow_null=True):
        if hasattr(workflow, "latest_runs"):  # prefetched by the list
            latest = workflow.latest_runs[0] if workflow.latest_runs else None
        else:
            latest = workflow.runs.order_by("-created_at", "-id").first()
        return WorkflowRunSummarySerializer(latest).data if latest else None

    def validate_group(self, group):
        user = self.context["request"].user
        if group is not None and not sees_everything(user) and not user.groups.filter(pk=group.pk).exists():
            raise serializers.ValidationError(f"You are not a member of the group '{group.name}'.")
        return group

    def validate(self, attrs):
        if "node_names" not in attrs and "edge_dicts" not in attrs and "step_params" not in attrs:
            if self.instance is None:
                raise serializers.ValidationError({"nodes": ["This field is required."]})
            return attrs
        current = self.instance.graph() if self.instance else ([], [])
        nodes = attrs.pop("node_names", current[0])
        edges = attrs.pop("edge_dicts", None)
        edges = [edge.as_dict() for edge in current[1]] if edges is None else [dict(edge) for edge in edges]
        step_params = attrs.pop("step_params", None)
        if step_params is None:
            step_params = self.instance.step_params if self.instance else {}
        user = self.context["request"].user
        jobs = {job.name: job for job in visible_jobs(user).filter(name__in=nodes)}
        try:
            attrs["graph"] = definitions.parse_graph(nodes, edges, jobs, step_params)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        commands = sorted(name for name, job in jobs.items() if job.kind in guarded_kinds())
        if commands and not may_run_command_jobs(user):
            raise serializers.ValidationError({"nodes": [
                f"Only users with the jobs.run_command_jobs permission may put command jobs in a workflow "
                f"({', '.join(commands)})."]})
        return attrs

    def save(self, **kwargs):
        raise NotImplementedError("A workflow is saved by workflows.actions.create or change, which check the "
                                  "command-job permission and write the audit entry: pass them the validated data.")


class StepSerializer(serializers.ModelSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)
    run_status = serializers.CharField(source="run.status", read_only=True, allow_null=True, default=None)
    attempt = serializers.IntegerField(source="run.attempt", read_only=True, allow_null=True, default=None)

    class Meta:
        model = WorkflowStep
        fields = ["job", "job_name", "status", "run", "run_status", "attempt", "kept", "reason", "started_at",
                  "finished_at"]
        read_only_fields = fields


class WorkflowRunSerializer(serializers.ModelSerializer):
    workflow_name = serializers.CharField(source="workflow.name", read_only=True)

    class Meta:
        model = WorkflowRun
        fields = ["id", "workflow", "workflow_name", "workflow_version", "status", "trigger", "scheduled_for",
                  "created_at", "finished_at", "reason", "rerun_of", "cancel_requested"]
        extra_kwargs = {"workflow_version": {"help_text": "The version of the workflow it ran; null: made before "
                                                          "versions were kept."}}
        read_only_fields = fields


class WorkflowRunDetailSerializer(WorkflowRunSerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(WorkflowRunSerializer.Meta):
        fields = [*WorkflowRunSerializer.Meta.fields, "steps"]
        read_only_fields = fields
