"""A run: one execution of a job's slot or of a manual trigger, in the status the lifecycle moved it to."""

from datetime import UTC

from django.conf import settings
from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.expressions import Col
from django.db.models.lookups import Exact, In
from django.utils import timezone

from ..choices import (
    ACTIVE_PHASES,
    LIVE_PHASE,
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    UNSUCCESSFUL_END_STATUSES,
    RunStatus,
    RunTrigger,
    phase_of,
)
from ..execution.publishing import task_id_for
from .job import Job


def idempotency_key(job_id, slot):
    """The key job code receives: the job and the slot, the same on every attempt and every re-run
    of a run, "<job id>:<slot in UTC, ISO 8601 to the microsecond>" (a manual run's slot is the
    moment it was made)."""
    return f"{job_id}:{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"


class JobRun(models.Model):
    # No index names the status, nor any column the claim or a heartbeat changes: PostgreSQL updates
    # such a row in place (a HOT update) and writes no index entry. The indexes that find runs by
    # status read ``phase`` instead, which a claim leaves as it is (below). job_id is served by
    # run_one_per_slot (job, scheduled_for), triggered_by (with created_at) by a partial index that scheduled runs stay out of.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs", db_index=False)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    # The status as the indexes see it (choices.phase_of), kept by the database: "live" for queued and
    # running alike, nothing for succeeded. Queries name the status as ever; its lookups (below) add
    # the phase for the indexes.
    phase = models.GeneratedField(
        expression=Case(When(In(F("status"), [str(s) for s in LIVE_STATUSES]), then=Value(LIVE_PHASE)),
                        When(Exact(F("status"), RunStatus.SUCCEEDED.value), then=Value(None)),
                        default=F("status"), output_field=models.CharField(max_length=16, null=True)),
        output_field=models.CharField(max_length=16, null=True), db_persist=True)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.SCHEDULE)
    scheduled_for = models.DateTimeField()
    # A workflow step run again by a re-run of its workflow run has a slot of its own (one run per
    # slot) but keeps the idempotency key of the run it re-runs: that run's slot is kept here.
    key_slot = models.DateTimeField(
        null=True, blank=True,
        help_text="The slot the idempotency key names when it is not the run's own: that of the run this one re-runs.")
    attempt = models.PositiveIntegerField(default=1)
    max_attempts = models.PositiveIntegerField(default=1)
    # Attempts lost to the infrastructure: they spend the job's lost budget, not max_attempts.
    lost_attempts = models.PositiveIntegerField(default=0)
    triggered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        db_index=False,
    )
    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField("next attempt", null=True, blank=True)
    publish_count = models.PositiveIntegerField(default=0)
    # A queued run its limit turned away (jobs.lifecycle.limits): since when it waits for room;
    # the claim that starts it adds the wait to waited_seconds and clears it.
    waiting_since = models.DateTimeField(null=True, blank=True)
    # (db_default: the scheduler inserts runs in bulk with SQL of its own, lifecycle.runs.create_runs.)
    waited_seconds = models.FloatField(
        default=0, db_default=0, help_text="How long the run waited for room under its job's limit, over all its attempts.")
    worker = models.CharField(max_length=255, blank=True)
    output = models.TextField(blank=True)
    output_bytes = models.BigIntegerField("output size (bytes)", default=0, help_text="Bytes the job wrote, kept or not.")
    result = models.JSONField(null=True, blank=True)
    # The values of the job's parameters this run was given, the defaults filled in (jobs.parameters):
    # what its code receives. {} for a job without parameters.
    # (A database default too: inserts that name no params, the benchmarks' among them, get {}.)
    params = models.JSONField(default=dict, db_default=models.Value("{}"), blank=True)
    error = models.TextField(blank=True)
    reason = models.CharField(max_length=255, blank=True, help_text="Why a run was skipped or cancelled.")
    # The W3C traceparent of the run's trace when traces are on (jobs.telemetry.tracing): its root, the
    # dispatch, which every later step in any process (a retry's message, a notification) hangs under.
    traceparent = models.CharField(max_length=55, blank=True, default="", db_default="", editable=False)
    # The version of its job the run was made from (Job.version then); null: made before versions were kept.
    # (A plain integer: a positive one's CHECK would make adding the column scan the table under its lock.)
    job_version = models.IntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One run per slot: a second scheduler, a restart or a retried tick cannot add another.
            models.UniqueConstraint(fields=["job", "scheduled_for"], name="run_one_per_slot"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="run_status_valid"),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="run_attempt_positive"),
        ]
        indexes = [
            # Run history of one job, newest first: job.runs.order_by("-created_at").
            models.Index(fields=["job", "-created_at"], name="run_job_recent_idx"),
            # Run history filtered by a status a run ends in other than success, newest first:
            # JobRun.objects.filter(status=...) on the runs page and the overview's failures. Only those
            # runs are in it (as in the next but one): a success, most ends, writes no entry in it.
            # Succeeded runs are most of the table, found soon enough through run_recent_idx.
            models.Index(fields=["phase", "-created_at"], name="run_unsuccessful_idx",
                         condition=Q(phase__in=UNSUCCESSFUL_END_STATUSES)),
            # Every run, newest first, in the model's ordering: the runs page and the overview's
            # latest failures (JobRun.objects.order_by("-created_at", "-id")[:50]), which otherwise
            # sort the whole table (bench/pages.py).
            models.Index(fields=["-created_at", "-id"], name="run_recent_idx"),
            # A job's runs of such statuses, newest first in the pages' order (created_at, then id): a
            # user's runs page ?status=..., the overview's failures (keyset.first, job by job) and the
            # job page. With the id in it, a status's runs come in order and, for a set of statuses,
            # from the index alone (an index-only scan); without it each job's runs of the status were
            # read from the table and sorted (bench/pages.py: 193-521 ms at 10,000,000 runs, 2-19 ms with it).
            models.Index(fields=["job", "phase", "-created_at", "-id"], name="run_job_unsuccessful_idx",
                         condition=Q(phase__in=UNSUCCESSFUL_END_STATUSES)),
            # The runs waiting for room under a limit, woken in order (jobs.lifecycle.limits): few.
            models.Index(fields=["job"], name="run_waiting_idx", condition=Q(waiting_since__isnull=False)),
            # The runs a user started in the last hour (jobs.actions.quotas, counted up to the quota
            # at each run now); and deleting a user sets triggered_by to NULL on their runs. Only
            # runs a person started have one.
            models.Index(fields=["triggered_by", "-created_at"], name="run_triggered_by_recent_idx",
                         condition=Q(triggered_by__isnull=False)),
            # The monitor and the retry dispatcher only look at unfinished runs:
            # JobRun.objects.filter(status__in=ACTIVE_STATUSES, ...). Queued and running runs share one
            # phase: the running ones are read among the queued (a burst's backlog), the price of a
            # claim that writes no index.
            models.Index(
                fields=["phase", "next_attempt_at"],
                name="run_active_idx",
                condition=Q(phase__in=ACTIVE_PHASES),
            ),
        ]

    def __str__(self):
        return f"{self.job.name} #{self.pk} ({self.status})"

    @property
    def idempotency_key(self):
        return idempotency_key(self.job_id, self.key_slot or self.scheduled_for)

    @property
    def is_terminal(self):
        return self.status in TERMINAL_STATUSES

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    @property
    def task_id(self):
        return task_id_for(self.pk, self.attempt)


class ThroughPhase:
    """``status=...`` and ``status__in=[...]`` that the indexes on ``phase`` serve: the statuses'
    phases added to the condition (``status = 'running' AND phase = 'live'``). With a success among
    the statuses (no phase), or a value that is not a plain status, the plain lookup. The status's own
    condition always stays: a succeeded run's phase is NULL, and ``exclude(status='skipped')`` as
    ``NOT (phase IN ('skipped'))`` alone would leave out every succeeded run (NOT NULL is NULL);
    ``status = 'skipped'`` is false there, so the conjunction is too (tests/test_run_indexes.py)."""

    def as_sql(self, compiler, connection):
        values = self.statuses()
        if not values or not isinstance(self.lhs, Col) or any(phase_of(v) is None for v in values):
            return super().as_sql(compiler, connection)
        phases = sorted({phase_of(v) for v in values})
        phase_sql, phase_params = compiler.compile(
            In(Col(self.lhs.alias, self.lhs.target.model._meta.get_field("phase")), phases))
        sql, params = super().as_sql(compiler, connection)
        return f"({sql} AND {phase_sql})", (*params, *phase_params)

    def statuses(self):
        """The statuses the lookup names, or None (an expression, a subquery)."""
        if hasattr(self.rhs, "resolve_expression"):
            return None
        values = [self.rhs] if self.lookup_name == "exact" else list(self.rhs)
        return values if all(v in RunStatus.values for v in values) else None


@JobRun._meta.get_field("status").register_lookup
class StatusIs(ThroughPhase, Exact):
    pass


@JobRun._meta.get_field("status").register_lookup
class StatusIn(ThroughPhase, In):
    pass


@JobRun._meta.get_field("status").register_lookup
class StatusOf(In):
    """``status__of=[...]``: the runs ``status__in`` finds, in a form no index serves (without the
    phase that ``status__in`` adds): a run looked up by its id and status is then read by its id,
    whatever the statistics say of how many runs are in that status. With ``status__in`` PostgreSQL
    read every running run through run_active_idx when its statistics said few were running
    (tests/test_worker_path.py reads the plans)."""

    lookup_name = "of"

    def process_lhs(self, compiler, connection, lhs=None):
        sql, params = super().process_lhs(compiler, connection, lhs)
        return f"({sql} || '')", params
