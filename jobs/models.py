"""Jobs, their runs, and the attempts of each run: the record of what is due and what ran."""

import math
from datetime import UTC, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models, transaction
from django.db.models import Q
from django.db.models.lookups import In
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

from . import kinds, schedules
from .publishing import DEFAULT_PRIORITY, MAX_PRIORITY, task_id_for


class ScheduleType(models.TextChoices):
    CRON = "cron", "Cron"
    INTERVAL = "interval", "Fixed interval"
    ONCE = "once", "Once"
    MANUAL = "manual", "Manual only"


class CatchupPolicy(models.TextChoices):
    NONE = "none", "Skip missed slots"
    LATEST = "latest", "Run the most recent missed slot"
    ALL = "all", "Run every missed slot (bounded)"


class OverlapPolicy(models.TextChoices):
    ALLOW = "allow", "Run both"
    SKIP = "skip", "Skip the new slot"
    QUEUE = "queue", "Start the new slot when the earlier run ends"
    REPLACE = "replace", "Cancel the earlier run, start the new slot"


class RunStatus(models.TextChoices):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
     RunStatus.CANCELLED}
)
ACTIVE_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING})
# The run state machine (README, "Runs and their states"): each status and the statuses a run may
# reach it from. queued -> queued is a publish again; running -> queued a lost attempt run again.
MOVES = {
    RunStatus.QUEUED: frozenset({RunStatus.PENDING, RunStatus.RETRYING, RunStatus.QUEUED, RunStatus.RUNNING}),
    RunStatus.RUNNING: frozenset({RunStatus.QUEUED}),
    RunStatus.RETRYING: frozenset({RunStatus.RUNNING}),
    RunStatus.SUCCEEDED: frozenset({RunStatus.RUNNING}),
    RunStatus.FAILED: frozenset({RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.TIMED_OUT: frozenset({RunStatus.RUNNING}),
    RunStatus.LOST: frozenset({RunStatus.RUNNING}),
    RunStatus.SKIPPED: frozenset({RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.CANCELLED: ACTIVE_STATUSES,
}
# The ends whose duration the pages chart (a run that was skipped, cancelled or lost has none worth it).
TIMED_END_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT)
# Where a run ends when it did not succeed.
UNSUCCESSFUL_END_STATUSES = [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
                             RunStatus.CANCELLED]


class RunTrigger(models.TextChoices):
    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"
    WORKFLOW = "workflow"  # a step of a workflow run (workflows.progress)


class AttemptOutcome(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"


class CountField(models.PositiveIntegerField):
    """A whole number whose form field states the field's own minimum (its MinValueValidator), so a
    form says "at least 1" once, rather than "at least 0" for -5 and then "at least 1" for 0."""

    def formfield(self, **kwargs):
        minimum = max((v.limit_value for v in self.validators if isinstance(v, MinValueValidator)), default=0)
        return super().formfield(**{"min_value": minimum, **kwargs})

    def deconstruct(self):
        # The same column as PositiveIntegerField: migrations see no change (and SQLite no table rebuild).
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.PositiveIntegerField", args, kwargs


def _positive(name):
    return Q(**{f"{name}__gt": 0})




class Job(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    tags = models.JSONField(default=list, blank=True)

    # The registered kinds (jobs.kinds), asked when a job is checked: a kind added to JOBS_KINDS needs
    # no migration.
    kind = models.CharField(max_length=kinds.NAME_MAX_LENGTH, choices=kinds.choices)
    target = models.TextField(help_text="The registered function's name, the shell command, or the URL.")
    args = models.JSONField(verbose_name="arguments", default=list, blank=True)
    kwargs = models.JSONField(verbose_name="keyword arguments", default=dict, blank=True)
    environment = models.JSONField(
        default=dict, blank=True, help_text="Environment variables for a command job."
    )
    http_method = models.CharField(verbose_name="HTTP method", max_length=8, default="GET", blank=True)
    http_headers = models.JSONField(verbose_name="HTTP headers", default=dict, blank=True)
    http_body = models.TextField(verbose_name="HTTP body", blank=True)
    http_ok_statuses = models.JSONField(
        verbose_name="accepted HTTP statuses", default=list, blank=True, help_text="Accepted status codes; empty means any 2xx."
    )
    # {name: Fernet token}: written through jobs.secrets.seal, never shown (jobs.secrets).
    secret_environment = models.JSONField(
        default=dict, blank=True, help_text="Environment variables for a command job whose values are secret."
    )
    secret_http_headers = models.JSONField(
        verbose_name="secret HTTP headers", default=dict, blank=True, help_text="HTTP headers whose values are secret (tokens)."
    )

    schedule_type = models.CharField(max_length=16, choices=ScheduleType.choices, default=ScheduleType.MANUAL)
    crontab = models.ForeignKey(CrontabSchedule, null=True, blank=True, on_delete=models.PROTECT)
    interval = models.ForeignKey(IntervalSchedule, null=True, blank=True, on_delete=models.PROTECT)
    clocked = models.ForeignKey(ClockedSchedule, null=True, blank=True, on_delete=models.PROTECT)
    catchup_policy = models.CharField(
        verbose_name="catch-up policy", max_length=8, choices=CatchupPolicy.choices, default=CatchupPolicy.LATEST
    )
    catchup_max = CountField(
        verbose_name="catch-up at most (slots)", default=10, help_text="With the 'all' policy, the most missed slots run after downtime."
    )

    overlap_policy = models.CharField(
        max_length=8, choices=OverlapPolicy.choices, default=OverlapPolicy.ALLOW,
        help_text="What happens when a slot comes due while an earlier run is still queued or running.",
    )
    start_deadline_seconds = CountField(
        verbose_name="start deadline (s)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="A scheduled run that cannot start within this many seconds of its slot is skipped as missed.",
    )
    jitter_seconds = CountField(
        verbose_name="jitter (s)", default=0, help_text="Start each scheduled run up to this many seconds after its slot, at random.",
    )

    # Limits of a command job's process group (rlimits, applied by the worker with prlimit).
    memory_limit_mb = CountField(
        verbose_name="memory limit (MB)", null=True, blank=True, validators=[MinValueValidator(8)],
        help_text="Command jobs: the most address space (virtual memory) each process may use, in MB.",
    )
    cpu_limit_seconds = CountField(
        verbose_name="CPU time limit (s)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Command jobs: the most CPU time each process may use, in seconds.",
    )
    max_open_files = CountField(
        null=True, blank=True, validators=[MinValueValidator(8)],
        help_text="Command jobs: the most files each process may hold open.",
    )
    max_processes = CountField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Command jobs: the most processes the command's user may have at once "
                  "(enforced when commands run as an unprivileged user, see JOBS_COMMAND_USER).",
    )
    working_directory = models.CharField(
        max_length=1024, blank=True, help_text="Command jobs: an absolute path to run the command in.",
    )

    enabled = models.BooleanField(default=True)
    queue = models.CharField(max_length=100, blank=True, default="")
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY, validators=[MaxValueValidator(MAX_PRIORITY)],
        help_text="0-9, 9 the most urgent: of the runs waiting in a queue, a worker takes the most urgent first.",
    )
    max_retries = CountField(
        default=0, validators=[MaxValueValidator(100)],
        help_text="More attempts after the first when the job itself fails or times out.",
    )
    max_lost_attempts = CountField(
        verbose_name="lost attempts run again", null=True, blank=True, validators=[MaxValueValidator(100)],
        help_text="Attempts lost to the infrastructure (a worker died or was cut off) that are run again at "
                  "once, apart from max_retries; empty means JOBS_MAX_LOST_ATTEMPTS.",
    )
    retry_backoff_seconds = models.FloatField(verbose_name="retry backoff (s)", default=10, validators=[MinValueValidator(0)])
    retry_backoff_max_seconds = models.FloatField(verbose_name="longest retry backoff (s)", default=600, validators=[MinValueValidator(0)])
    retry_jitter = models.BooleanField(verbose_name="jitter on retries", default=True)
    timeout_seconds = CountField(verbose_name="timeout (s)", default=3600, validators=[MinValueValidator(1)])
    sla_seconds = CountField(verbose_name="SLA (s)", null=True, blank=True, validators=[MinValueValidator(1)])
    retention_days = CountField(
        verbose_name="keep runs for (days)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Delete finished runs older than this many days; empty means JOBS_RETENTION_DAYS.",
    )
    retention_min_runs = CountField(
        verbose_name="keep at least (runs)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Always keep at least this many of the newest runs; empty means JOBS_RETENTION_MIN_RUNS.",
    )

    next_run_at = models.DateTimeField(verbose_name="next run", null=True, blank=True, editable=False)
    # The periodic slot check's place in this job's schedule: the first slot it has still to look
    # at (jobs.operations.slot_report.check_recent). Null when not known: a new job, or one whose
    # schedule changed or that was resumed; the check then starts from its window.
    slot_check_from = models.DateTimeField(null=True, blank=True, editable=False)
    last_run = models.ForeignKey(
        "JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(verbose_name="created", auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("run_command_jobs", "Can create, change, run and cancel command jobs")]
        constraints = [
            models.CheckConstraint(
                name="job_exactly_one_schedule",
                condition=(
                    Q(schedule_type=ScheduleType.CRON, crontab__isnull=False, interval__isnull=True, clocked__isnull=True)
                    | Q(schedule_type=ScheduleType.INTERVAL, crontab__isnull=True, interval__isnull=False, clocked__isnull=True)
                    | Q(schedule_type=ScheduleType.ONCE, crontab__isnull=True, interval__isnull=True, clocked__isnull=False)
                    | Q(schedule_type=ScheduleType.MANUAL, crontab__isnull=True, interval__isnull=True, clocked__isnull=True)
                ),
            ),
            models.CheckConstraint(condition=_positive("timeout_seconds"), name="job_timeout_positive"),
            models.CheckConstraint(condition=Q(priority__gte=0, priority__lte=MAX_PRIORITY), name="job_priority_range"),
            models.CheckConstraint(
                condition=Q(sla_seconds__isnull=True) | _positive("sla_seconds"), name="job_sla_positive"
            ),
            models.CheckConstraint(
                condition=(Q(retention_days__isnull=True) | _positive("retention_days"))
                & (Q(retention_min_runs__isnull=True) | _positive("retention_min_runs")),
                name="job_retention_positive",
            ),
            models.CheckConstraint(
                condition=Q(retry_backoff_seconds__gte=0) & Q(retry_backoff_max_seconds__gte=0),
                name="job_backoff_not_negative",
            ),
            *[
                models.CheckConstraint(condition=Q(**{f"{name}__isnull": True}) | _positive(name),
                                       name=f"job_{name}_positive")
                for name in ("memory_limit_mb", "cpu_limit_seconds", "max_open_files", "max_processes")
            ],
        ]
        indexes = [
            # The scheduler's tick: Job.objects.filter(enabled=True, next_run_at__lte=now)
            # .order_by("next_run_at"); only enabled jobs with a next slot are in the index.
            models.Index(
                fields=["next_run_at"],
                name="job_due_idx",
                condition=Q(enabled=True, next_run_at__isnull=False),
            ),
            # The slot check: only the jobs with a slot since its last pass (or none known yet).
            models.Index(fields=["slot_check_from"], name="job_slot_check_idx", condition=Q(enabled=True)),
            # The start-deadline sweep (lifecycle.skip_past_deadline), every second on the leader, starts
            # from the few jobs that have a deadline rather than from every waiting run.
            models.Index(
                fields=["start_deadline_seconds"],
                name="job_start_deadline_idx",
                condition=Q(start_deadline_seconds__isnull=False),
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def effective_queue(self):
        return self.queue or settings.JOBS_DEFAULT_QUEUE

    @property
    def max_attempts(self):
        return self.max_retries + 1

    @property
    def lost_attempts_allowed(self):
        return settings.JOBS_MAX_LOST_ATTEMPTS if self.max_lost_attempts is None else self.max_lost_attempts

    @property
    def effective_retention(self):
        """(days, min_runs): this job's retention policy, the global defaults filling the gaps."""
        return (self.retention_days or settings.JOBS_RETENTION_DAYS,
                self.retention_min_runs or settings.JOBS_RETENTION_MIN_RUNS)

    def clean(self):
        errors = {}
        if self.timeout_seconds and self.timeout_seconds > settings.JOBS_MAX_TIMEOUT_SECONDS:
            errors["timeout_seconds"] = (
                f"At most {settings.JOBS_MAX_TIMEOUT_SECONDS} seconds (JOBS_MAX_TIMEOUT_SECONDS)."
            )
        if (spec := kinds.get(self.kind)) is not None:  # an unknown kind is refused by the field's choices
            try:
                spec.validate(self)
            except ValidationError as exc:
                errors.update(exc.update_error_dict({}))
        if errors:
            raise ValidationError(errors)

    # --- schedule

    def describe_schedule(self):
        if self.schedule_type == ScheduleType.CRON and self.crontab:
            expr = self.cron_expression
            return f"{schedules.describe_cron(expr)} ({expr}, {self.crontab.timezone})"
        if self.schedule_type == ScheduleType.INTERVAL and self.interval:
            return f"Every {self.every_seconds:g} seconds"
        if self.schedule_type == ScheduleType.ONCE and self.clocked:
            return f"Once at {self.clocked.clocked_time.isoformat()}"
        return "Manual only"

    @property
    def cron_expression(self):
        c = self.crontab
        return f"{c.minute} {c.hour} {c.day_of_month} {c.month_of_year} {c.day_of_week}"

    @property
    def every_seconds(self):
        period_seconds = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}
        return self.interval.every * period_seconds[self.interval.period]

    def slot_after(self, after):
        """The first slot strictly after ``after``, or None when there is none."""
        if self.schedule_type == ScheduleType.CRON:
            return schedules.next_cron_slot(self.cron_expression, str(self.crontab.timezone), after)
        if self.schedule_type == ScheduleType.INTERVAL:
            return schedules.next_interval_slot(self.every_seconds, self.next_run_at or after, after)
        if self.schedule_type == ScheduleType.ONCE:
            run_at = self.clocked.clocked_time
            return run_at if run_at > after else None
        return None

    def upcoming_slots(self, count=5, after=None):
        slots, cursor = [], after or timezone.now()
        while len(slots) < count:
            cursor = self.slot_after(cursor)
            if cursor is None:
                break
            slots.append(cursor)
        return slots

    def slots_between(self, start, end, limit):
        """The slots in [start, end), at most ``limit + 1`` of them (so a caller can tell that a
        range holds more than ``limit``). An interval job's slots lie on the grid of its current
        next slot (``next_run_at``), extended backwards."""
        if self.schedule_type == ScheduleType.INTERVAL:
            every = self.every_seconds
            anchor = self.next_run_at or self.created_at or start
            first = anchor + timedelta(seconds=every * math.ceil((start - anchor).total_seconds() / every))
            count = max(0, min(limit + 1, math.ceil((end - first).total_seconds() / every)))
            return [first + timedelta(seconds=every * k) for k in range(count)]
        if self.schedule_type == ScheduleType.ONCE:
            run_at = self.clocked.clocked_time
            return [run_at] if start <= run_at < end else []
        if self.schedule_type != ScheduleType.CRON:
            return []
        slots, cursor = [], start - timedelta(microseconds=1)
        while len(slots) <= limit:
            cursor = self.slot_after(cursor)
            if cursor is None or cursor >= end:
                break
            slots.append(cursor)
        return slots

    def first_slot(self, now=None):
        """The slot a newly enabled or edited schedule starts from: never one in the past,
        except a one-time job whose moment has passed but which has not run yet."""
        now = now or timezone.now()
        if self.schedule_type == ScheduleType.ONCE:
            if self.pk and self.runs.filter(trigger=RunTrigger.SCHEDULE).exists():
                return None
            return self.clocked.clocked_time
        if self.schedule_type == ScheduleType.INTERVAL:
            # Saving a schedule never runs the job at once (stock beat does: celery#2531).
            return now + timedelta(seconds=self.every_seconds)
        if self.schedule_type == ScheduleType.CRON:
            return self.slot_after(now)
        return None


def idempotency_key(job_id, slot):
    """The key job code receives: the job and the slot, the same on every attempt and every re-run
    of a run, "<job id>:<slot in UTC, ISO 8601 to the microsecond>" (a manual run's slot is the
    moment it was made)."""
    return f"{job_id}:{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"


class JobRun(models.Model):
    # Every index is written again by every status change (status is indexed, so no update of a run
    # is HOT): job_id is served by run_one_per_slot (job, scheduled_for), triggered_by by a partial
    # index that scheduled runs stay out of.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs", db_index=False)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
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
    worker = models.CharField(max_length=255, blank=True)
    output = models.TextField(blank=True)
    output_bytes = models.BigIntegerField("output size (bytes)", default=0, help_text="Bytes the job wrote, kept or not.")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    reason = models.CharField(max_length=255, blank=True, help_text="Why a run was skipped or cancelled.")

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
            # runs are in it (as in the next but one): every status change writes a run's entry in each
            # index anew, and the claim and the success are most of them (bench/throughput.py).
            # Succeeded runs are most of the table, found soon enough through run_recent_idx.
            models.Index(fields=["status", "-created_at"], name="run_unsuccessful_idx",
                         condition=Q(status__in=UNSUCCESSFUL_END_STATUSES)),
            # Every run, newest first, in the model's ordering: the runs page and the overview's
            # latest failures (JobRun.objects.order_by("-created_at", "-id")[:50]), which otherwise
            # sort the whole table (bench/pages.py).
            models.Index(fields=["-created_at", "-id"], name="run_recent_idx"),
            # A job's runs of such statuses, newest first in the pages' order (created_at, then id): a
            # user's runs page ?status=..., the overview's failures (keyset.first, job by job) and the
            # job page. With the id in it, a status's runs come in order and, for a set of statuses,
            # from the index alone (an index-only scan); without it each job's runs of the status were
            # read from the table and sorted (bench/pages.py: 193-521 ms at 10,000,000 runs, 2-19 ms with it).
            models.Index(fields=["job", "status", "-created_at", "-id"], name="run_job_unsuccessful_idx",
                         condition=Q(status__in=UNSUCCESSFUL_END_STATUSES)),
            # Deleting a user sets triggered_by to NULL on their runs; only manual runs have one.
            models.Index(fields=["triggered_by"], name="run_triggered_by_idx", condition=Q(triggered_by__isnull=False)),
            # The monitor and the retry dispatcher only look at unfinished runs:
            # JobRun.objects.filter(status__in=ACTIVE_STATUSES, ...).
            models.Index(
                fields=["status", "next_attempt_at"],
                name="run_active_idx",
                condition=Q(status__in=["pending", "queued", "running", "retrying"]),
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

    def transition(self, to, *, frm, **fields):
        """Move this run to ``to`` if it is still in one of ``frm`` (and at this attempt).

        The conditional UPDATE makes two processes unable to both move the same run; returns
        whether this one did. Only the moves of the state machine (``MOVES``) are possible.
        """
        if not set(frm) <= MOVES[to]:
            raise ValueError(f"a run cannot go from {', '.join(sorted(set(frm) - MOVES[to]))} to {to}")
        if to in TERMINAL_STATUSES:
            # The run ends: its end is recorded for the figures (RunEnd) in the same transaction.
            with transaction.atomic():
                updated = self._move(to, frm, fields)
                if updated:
                    RunEnd.record(self, to, fields.get("finished_at") or timezone.now())
        else:
            updated = self._move(to, frm, fields)
        if updated:
            self.status = to
            for name, value in fields.items():
                setattr(self, name, value)
        return bool(updated)

    def _move(self, to, frm, fields):
        return JobRun.objects.filter(pk=self.pk, status__of=list(frm), attempt=self.attempt).update(
            status=to, **fields
        )

    @classmethod
    def move_locked(cls, runs, to, *, frm, **fields):
        """``transition`` for runs the caller holds locked (SELECT ... FOR UPDATE) in one of ``frm``:
        one UPDATE for them all, where a transition each costs an UPDATE a run. A move that does not
        end a run only. Without row locks (SQLite) each run moves by its own transition. Returns
        the runs moved."""
        if to in TERMINAL_STATUSES or not set(frm) <= MOVES[to]:
            raise ValueError(f"runs cannot be moved together from {', '.join(sorted(frm))} to {to}")
        if not connection.features.has_select_for_update:
            return [run for run in runs if run.transition(to, frm=frm, **fields)]
        assert all(run.status in frm for run in runs)
        cls.objects.filter(pk__in=[run.pk for run in runs]).update(status=to, **fields)
        for run in runs:
            run.status = to
            for name, value in fields.items():
                setattr(run, name, value)
        return runs


@JobRun._meta.get_field("status").register_lookup
class StatusOf(In):
    """``status__of=[...]``: the runs ``status__in`` finds, in a form no index on status can serve
    (nor run_active_idx, whose condition it does not imply): a run looked up by its id and status
    is then read by its id, whatever the statistics say of how many runs are in that status. With
    ``status__in`` PostgreSQL read every running run through run_active_idx when its statistics
    said few were running (tests/test_worker_path.py reads the plans)."""

    lookup_name = "of"

    def process_lhs(self, compiler, connection, lhs=None):
        sql, params = super().process_lhs(compiler, connection, lhs)
        return f"({sql} || '')", params


class JobAttempt(models.Model):
    # run_id lookups use attempt_one_per_number (run, number).
    run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING)
    task_id = models.CharField(max_length=255)
    worker = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="attempt_one_per_number"),
            models.CheckConstraint(condition=Q(outcome__in=AttemptOutcome.values), name="attempt_outcome_valid"),
        ]
        indexes = [
            # The overview's recent workers: JobAttempt.objects.filter(Q(started_at__gte=since) |
            # Q(heartbeat_at__gte=since)), a BitmapOr of these two instead of a Seq Scan (bench/pages.py).
            models.Index(fields=["started_at"], name="attempt_started_idx"),
            models.Index(fields=["heartbeat_at"], name="attempt_heartbeat_idx"),
        ]

    def __str__(self):
        return f"attempt {self.number} of run {self.run_id}"


class RunEnd(models.Model):
    """A run that ended and is not counted yet: one row, written in the same transaction as the end
    (``JobRun.transition``, ``lifecycle.postgres.succeed``, a run born skipped), and folded into the
    hourly counts and recent durations below by the scheduler leader (``lifecycle.rollup.fold``).

    The cheapest write the worker's success can make: on PostgreSQL the table has no index at all,
    not even its primary key (migration 0010), and no foreign key to check, so an end is one heap
    tuple, and two workers ending runs of the same job never wait for each other. Nothing looks a
    row up: the fold takes them in the order they lie in the table."""

    run_id = models.BigIntegerField(primary_key=True)  # a run ends once: it never leaves a terminal status
    job_id = models.BigIntegerField()
    status = models.CharField(max_length=16)
    ended_at = models.DateTimeField()
    seconds = models.FloatField(null=True)  # how long it ran, for the ends in TIMED_END_STATUSES

    @classmethod
    def record(cls, run, status, ended_at):
        timed = status in TIMED_END_STATUSES and run.started_at is not None and ended_at is not None
        cls.objects.create(run_id=run.pk, job_id=run.job_id, status=status, ended_at=ended_at,
                           seconds=(ended_at - run.started_at).total_seconds() if timed else None)


class EndCounts(models.Model):
    """How many runs ended in one hour, by how they ended, and how long the timed ones ran."""

    hour = models.DateTimeField()
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    timed_out = models.PositiveIntegerField(default=0)
    lost = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    timed = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0)

    COUNTERS = ("succeeded", "failed", "timed_out", "lost", "skipped", "cancelled", "timed", "seconds")

    class Meta:
        abstract = True


class JobHourCounts(EndCounts):
    """The ends of one job's runs in one hour: a job's success rate, a user's overview."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+", db_index=False)

    class Meta:
        constraints = [
            # Also the index of every read: a job's (or a user's jobs') hours since a moment.
            models.UniqueConstraint(fields=["job", "hour"], name="job_hour_counts_one_per_hour"),
        ]


class HourCounts(EndCounts):
    """The ends of every job's runs in one hour: the overview of a user who sees every job."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour"], name="hour_counts_one_per_hour")]


class RecentRuns(models.Model):
    """The last runs of a job that ended with a duration (``TIMED_END_STATUSES``), oldest first, as
    [run id, ended at (epoch seconds), seconds, status]: the sparkline and the duration chart."""

    KEPT = 100

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="+")
    points = models.JSONField(default=list)


class DeliveryCounter(models.Model):
    """Counts of events that leave no row of their own, such as dropped duplicate deliveries."""

    name = models.CharField(max_length=100, unique=True)
    value = models.BigIntegerField(default=0)

    @classmethod
    def increment(cls, name, by=1):
        updated = cls.objects.filter(name=name).update(value=models.F("value") + by)
        if not updated:
            obj, created = cls.objects.get_or_create(name=name, defaults={"value": by})
            if not created:
                cls.objects.filter(name=name).update(value=models.F("value") + by)

    @classmethod
    def get(cls, name):
        return cls.objects.filter(name=name).values_list("value", flat=True).first() or 0


def backoff_delay(job, attempt, rand):
    """Delay before the attempt after ``attempt``: exponential, capped, with full jitter."""
    delay = min(job.retry_backoff_max_seconds, job.retry_backoff_seconds * (2 ** (attempt - 1)))
    if job.retry_jitter:
        # "Equal jitter": half fixed, half random, so gaps still grow with each attempt.
        delay = delay / 2 + rand() * delay / 2
    return timedelta(seconds=delay)


class Lease(models.Model):
    """A named lease that one process holds at a time: the scheduler's leadership, the retention pass.

    Taken, renewed and released with conditional updates timed by the database clock (jobs/leases.py).
    Every taking raises ``epoch``, and work done under the lease checks its epoch in its own
    transaction, so a holder that another process replaced can never commit.
    """

    name = models.CharField(max_length=200, primary_key=True)
    holder = models.CharField(max_length=255, blank=True)
    epoch = models.BigIntegerField(default=0)
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    # When the scheduler leader last finished a housekeeping pass (the metrics' last tick).
    last_tick_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(epoch__gte=0), name="lease_epoch_not_negative")]

    def __str__(self):
        return f"{self.name} (epoch {self.epoch}, {self.holder or 'free'})"


class SchedulerOutage(models.Model):
    """A spell in which no scheduler ticked for ``JOBS_SCHEDULER_STALE_SECONDS``, noticed by the
    workers' watchdog (jobs/worker/watchdog.py), which opens one row per outage (its alert) and
    closes it when a scheduler ticks again (its recovery notice). Times are the database's."""

    # The leader's last tick before the outage (None: no scheduler had ever ticked).
    last_tick_at = models.DateTimeField(null=True, blank=True)
    noticed_at = models.DateTimeField()
    noticed_by = models.CharField(max_length=255, blank=True)
    recovered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-noticed_at", "-id"]
        indexes = [models.Index(fields=["noticed_at"], name="outage_open_idx",
                                condition=Q(recovered_at__isnull=True))]

    def __str__(self):
        state = f"recovered {self.recovered_at:%Y-%m-%d %H:%M:%S}" if self.recovered_at else "open"
        return f"scheduler outage noticed {self.noticed_at:%Y-%m-%d %H:%M:%S} ({state})"
