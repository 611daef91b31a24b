"""Workflows: jobs joined by dependency edges (a DAG), and the record of each workflow run.

A workflow run has one ``WorkflowStep`` per node. A step's move from ``waiting`` to ``active`` (when
its run is created) is a conditional UPDATE on a row that is unique per (workflow run, node), taken
while the workflow run's row is locked: that is what makes a job with two upstreams start once.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

from jobs.models import DstRepeated, DstSkipped, Job, JobRun, ScheduleType, Version
from jobs.models.job import exactly_one_schedule


class FailurePolicy(models.TextChoices):
    SKIP = "skip", "Skip the downstream job"
    RUN = "run", "Run the downstream job anyway"


class WorkflowRunStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


WORKFLOW_RUN_TERMINAL = frozenset({WorkflowRunStatus.SUCCEEDED, WorkflowRunStatus.FAILED,
                                   WorkflowRunStatus.CANCELLED})


class WorkflowTrigger(models.TextChoices):
    SCHEDULE = "schedule"
    MANUAL = "manual"
    RERUN = "rerun"


class StepStatus(models.TextChoices):
    WAITING = "waiting"      # an upstream has not finished yet
    ACTIVE = "active"        # its job run exists and has not finished
    SUCCEEDED = "succeeded"
    FAILED = "failed"        # its run failed, timed out, or was skipped by a job policy
    SKIPPED = "skipped"      # never run: an upstream did not succeed
    CANCELLED = "cancelled"


STEP_TERMINAL = frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED})


@dataclass(frozen=True)
class Edge:
    upstream: str
    downstream: str
    on_failure: str = ""

    def as_dict(self):
        data = {"from": self.upstream, "to": self.downstream}
        if self.on_failure:
            data["on_failure"] = self.on_failure
        return data



class Workflow(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="workflows")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="workflows")
    on_upstream_failure = models.CharField(
        max_length=8, choices=FailurePolicy.choices, default=FailurePolicy.SKIP,
        help_text="What a failed upstream means for a downstream job, unless its edge says otherwise.",
    )

    schedule_type = models.CharField(max_length=16, choices=ScheduleType.choices, default=ScheduleType.MANUAL)
    crontab = models.ForeignKey(CrontabSchedule, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    interval = models.ForeignKey(IntervalSchedule, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="+")
    clocked = models.ForeignKey(ClockedSchedule, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The number of its current version (``WorkflowVersion``), which each of its runs copies
    # (``WorkflowRun.workflow_version``); 0: not saved since versions were kept.
    version = models.IntegerField(default=0, db_default=0, editable=False)

    class Meta:
        ordering = ["name"]
        constraints = [
            exactly_one_schedule("workflow_exactly_one_schedule"),
            models.CheckConstraint(condition=Q(on_upstream_failure__in=FailurePolicy.values),
                                   name="workflow_failure_policy_valid"),
        ]
        indexes = [
            # dispatch_due_workflows: Workflow.objects.filter(enabled=True, next_run_at__lte=now).
            models.Index(fields=["next_run_at"], name="workflow_due_idx",
                         condition=Q(enabled=True, next_run_at__isnull=False)),
        ]

    def __str__(self):
        return self.name

    # A workflow's schedule is a job's schedule: the same django-celery-beat rows, read the same way.
    describe_schedule = Job.describe_schedule
    cron_expression = Job.cron_expression
    every_seconds = Job.every_seconds
    slot_after = Job.schedule_slot_after  # a workflow has no day rules
    # What a job's schedule has and a workflow's has not: no spread, no calendars or business days, no
    # cron as the user wrote it ("@daily": a job's cron_text).
    cron_text = ""
    spread_offset = timedelta(0)
    has_day_rules = False

    def day_rules(self):
        return None

    # A workflow's cron slots follow the default DST policy (a job's own policy is its fields).
    dst_skipped, dst_repeated = DstSkipped.SHIFT, DstRepeated.FIRST
    first_slot = Job.first_slot  # its runs' SCHEDULE trigger is the same word as a job's

    def graph(self):
        """(job names, [Edge]) as saved."""
        prefetched = "nodes" in getattr(self, "_prefetched_objects_cache", {})
        nodes = self.nodes.all() if prefetched else self.nodes.select_related("job")
        names = {node.pk: node.job.name for node in nodes}
        edges = [Edge(names[e.upstream_id], names[e.downstream_id], e.on_failure) for e in self.edges.all()]
        return list(names.values()), edges

    @property
    def node_names(self):
        return self.graph()[0]

    @property
    def step_params(self):
        """{job name: values} of the steps given parameter values."""
        prefetched = "nodes" in getattr(self, "_prefetched_objects_cache", {})
        nodes = self.nodes.all() if prefetched else self.nodes.select_related("job")
        return {node.job.name: node.params for node in nodes if node.params}

    @property
    def edge_dicts(self):
        return [edge.as_dict() for edge in self.graph()[1]]


class WorkflowVersion(Version):
    """What a saved change made the workflow (``workflows.actions.snapshot``), as a job's version is
    (``jobs.models.version``)."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="versions", db_index=False)
    of = "workflow"

    class Meta:
        ordering = ["workflow", "-number"]
        constraints = [models.UniqueConstraint(fields=["workflow", "number"], name="workflow_version_one_per_number")]


class WorkflowNode(models.Model):
    """A job in a workflow; a job appears at most once in one workflow."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="nodes")
    # PROTECT: deleting a job must not silently reshape a workflow's graph.
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="workflow_nodes")
    # The values of the job's parameters its runs in this workflow are given (jobs.parameters.resolve
    # fills in the defaults when the step starts); {}: the defaults.
    params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["workflow", "id"]
        constraints = [models.UniqueConstraint(fields=["workflow", "job"], name="workflow_node_one_per_job")]

    def __str__(self):
        return f"{self.workflow.name}: {self.job.name}"


class WorkflowEdge(models.Model):
    """``downstream`` runs after ``upstream`` has finished (succeeded, or per the failure policy)."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="edges")
    upstream = models.ForeignKey(WorkflowNode, on_delete=models.CASCADE, related_name="downstream_edges")
    downstream = models.ForeignKey(WorkflowNode, on_delete=models.CASCADE, related_name="upstream_edges")
    on_failure = models.CharField(max_length=8, choices=FailurePolicy.choices, blank=True, default="",
                                  help_text="Overrides the workflow's policy for this edge; blank: the workflow's.")

    class Meta:
        ordering = ["workflow", "id"]
        constraints = [
            models.UniqueConstraint(fields=["upstream", "downstream"], name="workflow_edge_once"),
            models.CheckConstraint(condition=~Q(upstream=models.F("downstream")), name="workflow_edge_not_self"),
            models.CheckConstraint(condition=Q(on_failure__in=["", *FailurePolicy.values]),
                                   name="workflow_edge_policy_valid"),
        ]

    def policy(self, workflow):
        return self.on_failure or workflow.on_upstream_failure


class WorkflowRun(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=WorkflowRunStatus.choices, default=WorkflowRunStatus.RUNNING)
    trigger = models.CharField(max_length=16, choices=WorkflowTrigger.choices)
    scheduled_for = models.DateTimeField()
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    rerun_of = models.OneToOneField("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="rerun")
    cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=255, blank=True)
    # The version of its workflow it ran (Workflow.version then); null: made before versions were kept.
    workflow_version = models.IntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One run per scheduled slot: a second scheduler or a restart cannot add another.
            models.UniqueConstraint(fields=["workflow", "scheduled_for"], condition=Q(trigger="schedule"),
                                    name="workflow_run_one_per_slot"),
            models.CheckConstraint(condition=Q(status__in=WorkflowRunStatus.values), name="workflow_run_status_valid"),
        ]
        indexes = [
            # A workflow's run history, newest first: workflow.runs.order_by("-created_at").
            models.Index(fields=["workflow", "-created_at"], name="workflow_run_recent_idx"),
        ]

    def __str__(self):
        return f"{self.workflow.name} run #{self.pk} ({self.status})"

    @property
    def is_terminal(self):
        return self.status in WORKFLOW_RUN_TERMINAL


class WorkflowStep(models.Model):
    workflow_run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="steps")
    node = models.ForeignKey(WorkflowNode, on_delete=models.CASCADE, related_name="steps")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.WAITING)
    # The run of this step; a re-run's kept steps point at the run of the workflow run they come from.
    # RESTRICT: a step's run goes only with the step's job (whose deletion removes both).
    run = models.ForeignKey(JobRun, null=True, blank=True, on_delete=models.RESTRICT, related_name="workflow_steps")
    kept = models.BooleanField(default=False, help_text="Carried over, succeeded, from the run this one re-runs.")
    reason = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow_run", "id"]
        constraints = [
            # Exactly one step, hence at most one run, per node in a workflow run.
            models.UniqueConstraint(fields=["workflow_run", "node"], name="workflow_step_one_per_node"),
            models.CheckConstraint(condition=Q(status__in=StepStatus.values), name="workflow_step_status_valid"),
            models.CheckConstraint(condition=Q(status="waiting") | Q(status="skipped") | Q(status="cancelled")
                                   | Q(run__isnull=False), name="workflow_step_started_has_run"),
        ]
        indexes = [
            # The hook when a run ends: WorkflowStep.objects.filter(run_id=..., status="active").
            models.Index(fields=["run"], name="workflow_step_active_run_idx", condition=Q(status="active")),
        ]

    def __str__(self):
        return f"{self.job.name} in {self.workflow_run_id} ({self.status})"
