"""A job: what to run, when (its schedule and the slots it makes), and how (policies, limits, retries)."""

import math
import uuid
from datetime import UTC, timedelta
from urllib.parse import quote
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

from .. import kinds, parameters
from ..choices import BundlePolicy, CatchupPolicy, DstRepeated, DstSkipped, OverlapPolicy, RunTrigger, ScheduleType
from ..execution.publishing import DEFAULT_PRIORITY, MAX_PRIORITY
from ..timing import calendars as day_math
from ..timing import schedules
from ..timing import spread as spreading
from .calendar import Calendar, day_rules_cache
from .fields import CountField
from .limit import KEY_MAX_LENGTH, Limit
from .quota import TeamPingKey


def exactly_one_schedule(name):
    """The constraint that a job's or a workflow's schedule type has its one schedule row, or none
    for manual."""
    return models.CheckConstraint(
        name=name,
        condition=(
            Q(schedule_type=ScheduleType.CRON, crontab__isnull=False, interval__isnull=True, clocked__isnull=True)
            | Q(schedule_type=ScheduleType.INTERVAL, crontab__isnull=True, interval__isnull=False, clocked__isnull=True)
            | Q(schedule_type=ScheduleType.ONCE, crontab__isnull=True, interval__isnull=True, clocked__isnull=False)
            | Q(schedule_type=ScheduleType.MANUAL, crontab__isnull=True, interval__isnull=True, clocked__isnull=True)
        ),
    )


MAX_CALENDARS = 20  # calendars one job may name
DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS = 3600, 30 * 24 * 3600  # a check-in's grace_seconds


def _positive(name):
    return Q(**{f"{name}__gt": 0})




NULL_MOSTLY = ("crontab", "interval", "clocked", "group")  # foreign keys indexed where set


class Job(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs", db_index=False
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
    # [{"name", "type", "default", "required", "description", "choices"}] (jobs.parameters): the values
    # a run is given, recorded on it (JobRun.params); checked and normalised by clean().
    parameters = models.JSONField(
        default=list, blank=True,
        help_text="Run-time parameters: a list of {name, type, default, required, description, choices}; "
                  "types string, integer, number, boolean, date, datetime, choice.",
    )
    http_method = models.CharField(verbose_name="HTTP method", max_length=8, default="GET", blank=True)
    http_headers = models.JSONField(verbose_name="HTTP headers", default=dict, blank=True)
    http_body = models.TextField(verbose_name="HTTP body", blank=True)
    http_ok_statuses = models.JSONField(
        verbose_name="accepted HTTP statuses", default=list, blank=True, help_text="Accepted status codes; empty means any 2xx."
    )
    # {name: Fernet token}: written through jobs.access.secrets.seal, never shown (jobs.access.secrets).
    secret_environment = models.JSONField(
        default=dict, blank=True, help_text="Environment variables for a command job whose values are secret."
    )
    secret_http_headers = models.JSONField(
        verbose_name="secret HTTP headers", default=dict, blank=True, help_text="HTTP headers whose values are secret (tokens)."
    )

    schedule_type = models.CharField(max_length=16, choices=ScheduleType.choices, default=ScheduleType.MANUAL)
    # Indexed where set only (Meta.indexes), as is group: a job has one of the three.
    crontab = models.ForeignKey(CrontabSchedule, null=True, blank=True, on_delete=models.PROTECT, db_index=False)
    interval = models.ForeignKey(IntervalSchedule, null=True, blank=True, on_delete=models.PROTECT, db_index=False)
    clocked = models.ForeignKey(ClockedSchedule, null=True, blank=True, on_delete=models.PROTECT, db_index=False)
    catchup_policy = models.CharField(
        verbose_name="catch-up policy", max_length=8, choices=CatchupPolicy.choices, default=CatchupPolicy.LATEST
    )
    catchup_max = CountField(
        verbose_name="catch-up at most (slots)", default=10, help_text="With the 'all' policy, the most missed slots run after downtime."
    )

    # What a cron slot does on the nights clocks change (jobs.timing.schedules, docs/guide/dst.md).
    dst_skipped = models.CharField(
        verbose_name="DST: skipped hour", max_length=8, choices=DstSkipped.choices, default=DstSkipped.SHIFT,
        help_text="A slot whose wall-clock time does not exist (clocks jump forward): run it shifted forward by "
                  "the gap, or skip it.",
    )
    dst_repeated = models.CharField(
        verbose_name="DST: repeated hour", max_length=8, choices=DstRepeated.choices, default=DstRepeated.FIRST,
        help_text="A slot whose wall-clock time comes twice (clocks fall back): run it at its first occurrence, "
                  "its second, or both.",
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
    spread = CountField(
        verbose_name="spread (s)", default=0, validators=[MaxValueValidator(spreading.MAX_SPREAD_SECONDS)],
        help_text="Move every slot by the same offset in [0, spread) seconds, chosen from a hash of the job's "
                  "name: jobs on one schedule stop starting in the same second (docs/guide/forecast.md).",
    )
    # The offset itself (spread_offset, in seconds), kept beside the name and spread it is computed from
    # (clean and save), so the load forecast groups a million jobs by it in one indexed query.
    spread_offset_seconds = models.PositiveIntegerField(default=0, editable=False)
    # The cron expression as written when it holds H (Jenkins' hash): the crontab row holds it resolved
    # for this job (jobs.timing.spread.resolve), so beat and the admin read plain numbers. Empty otherwise.
    cron_text = models.CharField(max_length=200, blank=True, default="", editable=False)

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

    # Day rules (jobs.timing.calendars): the dates of these calendars are skipped, judged in the
    # schedule's timezone (UTC for an interval).
    calendars = models.JSONField(
        default=list, blank=True, help_text="Names of calendars whose dates (holidays, closures) the job skips.",
    )
    business_days = models.BooleanField(
        default=False, help_text="Run on business days only: Monday to Friday, less the dates of the calendars.",
    )
    business_day_of_month = models.SmallIntegerField(
        null=True, blank=True,
        validators=[MinValueValidator(-day_math.MAX_BUSINESS_DAYS_IN_A_MONTH),
                    MaxValueValidator(day_math.MAX_BUSINESS_DAYS_IN_A_MONTH)],
        help_text="Only the Nth business day of each month: 1 the first, 3 the third; -1 the last, -2 the one "
                  "before. Needs business days.",
    )

    enabled = models.BooleanField(default=True)
    pause_after_failures = CountField(
        verbose_name="pause after failures", null=True, blank=True, validators=[MaxValueValidator(1000)],
        help_text="Pause the job itself after this many runs in a row end failed, timed out or lost; "
                  "empty or 0: never.",
    )
    # The runs that ended failed, timed out or lost since the job's last success (or resume): kept
    # up to date where runs end (jobs.lifecycle.streaks), so no run's end reads the history.
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    paused_reason = models.TextField(
        blank=True, editable=False, help_text="Why the service paused the job itself (auto-pause); cleared on resume.",
    )
    # No notification of the job until then (jobs.actions.jobs.snooze; notifications.outbox reads it).
    snoozed_until = models.DateTimeField(null=True, blank=True, editable=False)
    queue = models.CharField(max_length=100, blank=True, default="")
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY, validators=[MaxValueValidator(MAX_PRIORITY)],
        help_text="0-9, 9 the most urgent: of the runs waiting in a queue, a worker takes the most urgent first.",
    )
    # Whether its runs may share a message with other short runs when many are due together
    # (jobs.lifecycle.bundles, docs/guide/bundles.md).
    bundle = models.CharField(
        max_length=8, choices=BundlePolicy.choices, default=BundlePolicy.AUTO, db_default=BundlePolicy.AUTO,
        help_text="When many runs are due together, short ones share a message (a bundle): auto (or short) unless "
                  "the job's recent runs are long (JOBS_BUNDLE_SHORT_SECONDS), a new job included; never to keep "
                  "each run its own message.",
    )
    limit_key = models.CharField(
        verbose_name="limit", max_length=KEY_MAX_LENGTH, blank=True, default="",
        help_text="The key of a limit (/api/limits/) shared with other jobs: its runs wait while the limit is full.",
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
    min_duration_seconds = CountField(
        verbose_name="shortest run (s)", null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="A run that succeeds sooner than this many seconds sends the too_fast event.",
    )
    # Check-in jobs (jobs.kinds.checkin): how long after a slot its ping may come, and the secret of
    # its ping URL (SITE_URL/ping/<ping_key>), made when a check-in job is first saved.
    grace_seconds = CountField(
        verbose_name="grace (s)", null=True, blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_GRACE_SECONDS)],
        help_text="Check-in jobs: a slot with no ping within this many seconds ends failed and sends missed; "
                  "empty means an hour.",
    )
    # Unique where set (job_ping_key_unique): the jobs without one are not in its index.
    ping_key = models.UUIDField(null=True, blank=True, editable=False)
    # A check-in's first slot still to be looked at for a missing ping (jobs.lifecycle.pings.fail_unpinged),
    # its next slot when resumed; null when not known (new, edited): from when the job was last saved.
    ping_check_from = models.DateTimeField(null=True, blank=True, editable=False)
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
    # The number of the job's current version (``JobVersion``), which each run copies as it is made
    # (``JobRun.job_version``); 0: not saved since versions were kept.
    version = models.IntegerField(default=0, db_default=0, editable=False)
    created_at = models.DateTimeField(verbose_name="created", auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("run_command_jobs", "Can create, change, run and cancel command jobs")]
        constraints = [
            exactly_one_schedule("job_exactly_one_schedule"),
            models.UniqueConstraint(fields=["ping_key"], condition=Q(ping_key__isnull=False), name="job_ping_key_unique"),
            models.CheckConstraint(condition=_positive("timeout_seconds"), name="job_timeout_positive"),
            models.CheckConstraint(condition=Q(dst_skipped__in=DstSkipped.values), name="job_dst_skipped_valid"),
            models.CheckConstraint(condition=Q(dst_repeated__in=DstRepeated.values), name="job_dst_repeated_valid"),
            models.CheckConstraint(condition=Q(priority__gte=0, priority__lte=MAX_PRIORITY), name="job_priority_range"),
            models.CheckConstraint(condition=Q(spread__gte=0, spread__lte=spreading.MAX_SPREAD_SECONDS),
                                   name="job_spread_range"),
            models.CheckConstraint(condition=Q(spread=0, spread_offset_seconds=0)
                                   | Q(spread_offset_seconds__lt=models.F("spread")), name="job_spread_offset_within"),
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
            models.CheckConstraint(
                condition=Q(business_day_of_month__isnull=True)
                | Q(business_days=True, business_day_of_month__gte=-day_math.MAX_BUSINESS_DAYS_IN_A_MONTH,
                    business_day_of_month__lte=day_math.MAX_BUSINESS_DAYS_IN_A_MONTH)
                & ~Q(business_day_of_month=0),
                name="job_business_day_of_month_valid",
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
            # The jobs of one of the load forecast's cron groups (jobs.operations.forecast.jobs_of): by
            # schedule row and offset. Only enabled cron jobs are in it: a dispatch's update of a job's
            # row is not a HOT one, and every index the row is in takes a new entry.
            models.Index(fields=["crontab", "spread_offset_seconds"], name="job_cron_offset_idx",
                         condition=Q(enabled=True, schedule_type=ScheduleType.CRON)),
            # The slot check: only the jobs with a slot since its last pass (or none known yet).
            models.Index(fields=["slot_check_from"], name="job_slot_check_idx", condition=Q(enabled=True)),
            # The start-deadline sweep (lifecycle.skip_past_deadline), every second on the leader, starts
            # from the few jobs that have a deadline rather than from every waiting run.
            models.Index(
                fields=["start_deadline_seconds"],
                name="job_start_deadline_idx",
                condition=Q(start_deadline_seconds__isnull=False),
            ),
            # The jobs of a limit: the claim's count of their running runs, the waking of their
            # waiting ones (jobs.lifecycle.limits); only jobs that name a limit are in it.
            models.Index(fields=["limit_key"], name="job_limit_key_idx", condition=~Q(limit_key="")),
            # The jobs of a schedule row or a team: what deleting one checks (its foreign keys), the
            # team's jobs. Only the jobs that have one are in each: a dispatch moves a job's row to a
            # new place (next_run_at is indexed), and each index the row is in takes a new entry;
            # the jobs without a team, and two of each job's three schedule columns, are NULL.
            *[models.Index(fields=[name], name=f"job_{name}_idx", condition=Q(**{f"{name}__isnull": False}))
              for name in NULL_MOSTLY],
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

    @property
    def grace(self):
        """How long after a slot a check-in's ping may come (``grace_seconds``, or an hour)."""
        return timedelta(seconds=self.grace_seconds or DEFAULT_GRACE_SECONDS)

    @property
    def ping_url(self):
        """Where a check-in job's runs are reported (jobs.api.pings); None for other jobs."""
        elsewhere = self.ping_key and self.kind in kinds.running_elsewhere()
        return f"{settings.SITE_URL}/ping/{self.ping_key}" if elsewhere else None

    @property
    def ping_url_slug(self):
        """A check-in job's second ping URL, SITE_URL/ping/<its team's ping key>/<its name>, once the
        team has a key (jobs.models.TeamPingKey); None otherwise, or for a name with a "/" no URL can hold."""
        if not self.ping_url or self.group_id is None or "/" in self.name:
            return None
        try:
            key = self.group.ping_key.key  # select_related("group__ping_key") by the API and the job page
        except TeamPingKey.DoesNotExist:
            return None
        return f"{settings.SITE_URL}/ping/{key}/{quote(self.name, safe='')}"

    def save(self, *args, **kwargs):
        self.spread_offset_seconds = spreading.offset_seconds(self.name, self.spread)
        if self.give_ping_key() and kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = [*kwargs["update_fields"], "ping_key"]
        super().save(*args, **kwargs)

    def give_ping_key(self):
        """Make a check-in job's ping key (kept for good once made, across kinds); whether one was made."""
        if self.ping_key is None and self.kind in kinds.running_elsewhere():
            self.ping_key = uuid.uuid4()
            return True
        return False

    def clean(self):
        self.spread_offset_seconds = spreading.offset_seconds(self.name, self.spread)  # the bulk saves clean, not save
        self.give_ping_key()
        errors = {}
        if self.timeout_seconds and self.timeout_seconds > settings.JOBS_MAX_TIMEOUT_SECONDS:
            errors["timeout_seconds"] = (
                f"At most {settings.JOBS_MAX_TIMEOUT_SECONDS} seconds (JOBS_MAX_TIMEOUT_SECONDS)."
            )
        try:
            self.parameters = parameters.checked_declaration(self.parameters, self.secret_names())
        except ValidationError as exc:
            errors.update(exc.update_error_dict({}))
        else:
            if self.schedule_type != ScheduleType.MANUAL and (missing := parameters.missing_defaults(self.parameters)):
                errors["parameters"] = [
                    f"{', '.join(missing)}: required with no default, but the job runs on a schedule and its "
                    "scheduled runs take the defaults. Give a default, or make it not required."]
        if self.limit_key and not Limit.objects.filter(key=self.limit_key).exists():
            errors["limit_key"] = (f"No limit has the key '{self.limit_key[:KEY_MAX_LENGTH]}': create it first "
                                   "(/api/limits/, or a limits: section of the same file).")
        if (spec := kinds.get(self.kind)) is not None:  # an unknown kind is refused by the field's choices
            try:
                spec.validate(self)
            except ValidationError as exc:
                errors.update(exc.update_error_dict({}))
        errors.update(self.day_rule_errors())
        if errors:
            raise ValidationError(errors)

    def secret_names(self):
        """The names the job's secret fields use (no parameter may take one)."""
        return [name for value in (self.secret_environment, self.secret_http_headers) if isinstance(value, dict)
                for name in value]

    def default_params(self):
        """The values of a run given none: a scheduled run's."""
        return parameters.defaults(self.parameters)

    def day_rule_errors(self):
        """{field: [messages]} of the job's day rules (calendars, business days)."""
        errors, names = {}, self.calendars
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            errors["calendars"] = ["Must be a list of calendar names."]
        elif any("\x00" in name for name in names):
            errors["calendars"] = ["Must not contain NUL (\\u0000) characters."]
        elif len(set(names)) != len(names):
            errors["calendars"] = ["Names a calendar twice."]
        elif len(names) > MAX_CALENDARS:
            errors["calendars"] = [f"At most {MAX_CALENDARS} calendars."]
        elif names:
            unknown = sorted(set(names) - set(Calendar.objects.filter(name__in=names).values_list("name", flat=True)))
            if unknown:
                shown = ", ".join(repr(name[:100]) for name in unknown[:5])
                errors["calendars"] = [f"No calendar is named {shown} (see /api/calendars/)."]
        nth = self.business_day_of_month
        if nth is not None:
            if nth == 0 or abs(nth) > day_math.MAX_BUSINESS_DAYS_IN_A_MONTH:
                errors["business_day_of_month"] = [
                    f"From 1 to {day_math.MAX_BUSINESS_DAYS_IN_A_MONTH} (the Nth business day), or from -1 (the "
                    f"last) to -{day_math.MAX_BUSINESS_DAYS_IN_A_MONTH}; not 0."]
            elif not self.business_days:
                errors["business_day_of_month"] = ["Needs business_days: true (it counts business days)."]
        if self.has_day_rules and self.schedule_type == ScheduleType.ONCE:
            errors.setdefault("calendars", []).append(
                "A one-time job runs at its moment: calendars and business days are for cron and interval schedules.")
        return errors

    # --- schedule

    def describe_schedule(self):
        if self.schedule_type == ScheduleType.CRON and self.crontab:
            expr = self.cron_expression
            written = f"{self.cron_text} = {expr}" if self.cron_text else expr
            return f"{schedules.describe_cron(expr)} ({written}, {self.crontab.timezone})"
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

    @property
    def spread_offset(self):
        """How much later than its schedule's times this job's slots fall (``spread``)."""
        return timedelta(seconds=spreading.offset_seconds(self.name, self.spread))

    @property
    def has_day_rules(self):
        return bool(self.calendars or self.business_days)

    def day_rules(self):
        """The job's ``DayRules`` (jobs.timing.calendars), or None when it has none."""
        if not self.has_day_rules:
            return None
        return day_rules_cache.day_rules(self.calendars, self.business_days, self.business_day_of_month)

    @property
    def day_zone(self):
        """The zone in which the job's slots' dates are judged: the cron schedule's, else UTC."""
        if self.schedule_type == ScheduleType.CRON and self.crontab:
            return ZoneInfo(str(self.crontab.timezone))
        return UTC

    def slot_after(self, after):
        """The first slot strictly after ``after`` on a date the job's day rules leave open, or None
        when there is none (within jobs.timing.calendars.LOOKAHEAD_DAYS)."""
        if (rules := self.day_rules()) is None:
            return self.schedule_slot_after(after)
        return day_math.first_open_slot(self.schedule_slot_after, self.day_zone, rules, after)

    def closed_slots(self, start, end, limit):
        """[(slot, why)] of the schedule's slots in [start, end) that fall on a date the day rules close:
        what the slot report shows as skipped. At most ``limit + 1`` of them."""
        if (rules := self.day_rules()) is None or self.schedule_type not in (ScheduleType.CRON, ScheduleType.INTERVAL):
            return []
        step = self.schedule_slot_after if self.schedule_type == ScheduleType.CRON else self._interval_grid(start)
        zone, found, cursor = self.day_zone, [], start - timedelta(microseconds=1)
        while len(found) <= limit:
            cursor = step(cursor)
            if cursor is None or cursor >= end:
                break
            if why := rules.why_closed(day_math.local_date(cursor, zone)):
                found.append((cursor, why))
        return found

    def schedule_slot_after(self, after):
        """The schedule's first slot strictly after ``after``, whatever the day rules say. A slot is
        the schedule's time moved by ``spread_offset``: that instant is the run's ``scheduled_for``."""
        shift = self.spread_offset
        if self.schedule_type == ScheduleType.CRON:
            return schedules.next_cron_slot(self.cron_expression, str(self.crontab.timezone), after - shift,
                                            self.dst_skipped, self.dst_repeated) + shift
        if self.schedule_type == ScheduleType.INTERVAL:  # the grid's anchor, next_run_at, holds the offset
            return schedules.next_interval_slot(self.every_seconds, self.next_run_at or after, after)
        if self.schedule_type == ScheduleType.ONCE:
            run_at = self.clocked.clocked_time + shift
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

    def _interval_grid(self, start):
        """An interval job's "first slot strictly after" on the grid ``slots_between`` uses from ``start``."""
        every = self.every_seconds
        anchor = self.next_run_at or self.created_at or start
        first = anchor + timedelta(seconds=every * math.ceil((start - anchor).total_seconds() / every))
        return lambda after: schedules.next_interval_slot(every, first, after)

    def slots_between(self, start, end, limit):
        """The slots in [start, end), at most ``limit + 1`` of them (so a caller can tell that a
        range holds more than ``limit``). An interval job's slots lie on the grid of its current
        next slot (``next_run_at``), extended backwards."""
        if self.schedule_type == ScheduleType.INTERVAL:
            every = self.every_seconds
            anchor = self.next_run_at or self.created_at or start
            first = anchor + timedelta(seconds=every * math.ceil((start - anchor).total_seconds() / every))
            if (rules := self.day_rules()) is not None:
                return day_math.open_slots(self._interval_grid(start), self.day_zone, rules,
                                           start - timedelta(microseconds=1), end, limit)
            count = max(0, min(limit + 1, math.ceil((end - first).total_seconds() / every)))
            return [first + timedelta(seconds=every * k) for k in range(count)]
        if self.schedule_type == ScheduleType.ONCE:
            run_at = self.clocked.clocked_time + self.spread_offset
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
            return self.clocked.clocked_time + self.spread_offset
        if self.schedule_type == ScheduleType.INTERVAL:
            # Saving a schedule never runs the job at once (stock beat does: celery#2531).
            first, every = now + timedelta(seconds=self.every_seconds) + self.spread_offset, self.every_seconds
            if (rules := self.day_rules()) is None:
                return first
            return day_math.first_open_slot(lambda t: schedules.next_interval_slot(every, first, t), self.day_zone,
                                            rules, first - timedelta(microseconds=1))
        if self.schedule_type == ScheduleType.CRON:
            return self.slot_after(now)
        return None
