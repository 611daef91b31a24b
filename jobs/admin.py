"""The Django admin for jobs and their runs: define and schedule jobs, trigger them, read history."""

from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import admin, messages
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from audit import trail
from audit.models import Source

from . import definitions, runs
from .forms import JobAdminForm
from .models import Job, JobAttempt, JobRun, RunStatus, ScheduleType

RECENT_RUNS_ON_JOB_PAGE = 20
RECENT_AUDIT_ON_JOB_PAGE = 20

STATUS_COLOURS = {
    RunStatus.PENDING: "#6c757d",
    RunStatus.QUEUED: "#0d6efd",
    RunStatus.RUNNING: "#0dcaf0",
    RunStatus.RETRYING: "#fd7e14",
    RunStatus.SUCCEEDED: "#198754",
    RunStatus.FAILED: "#dc3545",
    RunStatus.TIMED_OUT: "#b02a37",
    RunStatus.LOST: "#6f42c1",
    RunStatus.SKIPPED: "#adb5bd",
    RunStatus.CANCELLED: "#495057",
}


def status_badge(status):
    colour = STATUS_COLOURS.get(status, "#6c757d")
    return format_html(
        '<span class="run-status run-status-{}" style="background:{};color:#fff;padding:1px 6px;'
        'border-radius:8px;white-space:nowrap">{}</span>',
        status, colour, status,
    )


def run_link(run, text=None):
    url = reverse("admin:jobs_jobrun_change", args=[run.pk])
    return format_html('<a href="{}">{}</a>', url, text or f"#{run.pk}")


def format_duration(delta):
    if delta is None:
        return "-"
    seconds = delta.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


def job_zone(job):
    if job.schedule_type == ScheduleType.CRON and job.crontab:
        return ZoneInfo(str(job.crontab.timezone))
    return ZoneInfo("UTC")


class RecentRunsFormSet(BaseInlineFormSet):
    def get_queryset(self):
        # The inline shows the latest runs only; a job may have thousands.
        return super().get_queryset()[:RECENT_RUNS_ON_JOB_PAGE]


class ReadOnlyInline(admin.TabularInline):
    can_delete = False
    extra = 0
    max_num = 0

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RecentRunInline(ReadOnlyInline):
    model = JobRun
    formset = RecentRunsFormSet
    verbose_name_plural = f"latest {RECENT_RUNS_ON_JOB_PAGE} runs"
    fields = ("run", "status_badge", "trigger", "attempt", "scheduled_for", "started_at", "finished_at", "worker")
    readonly_fields = fields
    show_change_link = True

    @admin.display(description="run")
    def run(self, run):
        return run_link(run)

    @admin.display(description="status")
    def status_badge(self, run):
        return status_badge(run.status)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    form = JobAdminForm
    list_display = ("name", "kind", "schedule", "enabled", "next_run_at", "last_run_status", "owner")
    list_filter = ("kind", "enabled", "schedule_type")
    list_select_related = ("crontab", "interval", "clocked", "owner", "last_run")
    search_fields = ("name", "target", "description")
    actions = ("run_selected_now", "pause_selected", "resume_selected", "clone_selected")
    readonly_fields = ("schedule_in_words", "upcoming_runs", "last_run_summary", "next_run_at", "audit_trail")
    save_on_top = True

    def get_fieldsets(self, request, obj=None):
        schedule = ["schedule_type", "cron", "timezone", "every_seconds", "run_at",
                    "catchup_policy", "catchup_max", "overlap_policy", "start_deadline_seconds", "jitter_seconds",
                    "enabled"]
        if obj is not None:
            schedule += ["schedule_in_words", "next_run_at", "upcoming_runs", "last_run_summary"]
        return [
            ("Identity", {"fields": ["name", "description", "owner", "group", "tags"]}),
            ("What to run", {"fields": ["kind", "target", "args", "kwargs", "environment", "http_method",
                                        "http_headers", "http_body", "http_ok_statuses"]}),
            ("Command limits", {"fields": ["memory_limit_mb", "cpu_limit_seconds", "max_open_files",
                                           "max_processes", "working_directory"]}),
            ("Schedule", {"fields": schedule}),
            ("Execution", {"fields": ["queue", "max_retries", "retry_backoff_seconds",
                                      "retry_backoff_max_seconds", "retry_jitter", "timeout_seconds",
                                      "sla_seconds"]}),
            ("History", {"fields": ["retention_days", "retention_min_runs"]}),
            *([("Audit trail", {"fields": ["audit_trail"]})] if obj is not None else []),
        ]

    def get_inlines(self, request, obj):
        return [RecentRunInline] if obj is not None else []

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("crontab", "interval", "clocked", "last_run")

    # --- read-only displays

    @admin.display(description="schedule")
    def schedule(self, job):
        return job.describe_schedule()

    @admin.display(description="schedule in words")
    def schedule_in_words(self, job):
        return job.describe_schedule()

    @admin.display(description="next 5 runs")
    def upcoming_runs(self, job):
        slots = job.upcoming_slots(5)
        if not slots:
            return "None"
        zone = job_zone(job)
        return format_html(
            "<ul style='margin:0;padding-left:1.2em'>{}</ul>",
            format_html_join(
                "", "<li>{} ({}) = {} UTC</li>",
                ((s.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z"), zone.key,
                  s.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S")) for s in slots),
            ),
        )

    @admin.display(description="last run")
    def last_run_summary(self, job):
        run = job.last_run
        if run is None:
            return "Never run"
        return format_html("{} {} scheduled for {}", run_link(run), status_badge(run.status),
                           run.scheduled_for.strftime("%Y-%m-%d %H:%M:%S %Z"))

    @admin.display(description=f"latest {RECENT_AUDIT_ON_JOB_PAGE} changes")
    def audit_trail(self, job):
        entries = job.audit.order_by("-created_at", "-id")[:RECENT_AUDIT_ON_JOB_PAGE]
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (entry.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"), entry.actor_name, entry.get_action_display(),
             f"{entry.get_source_display()} {entry.remote_addr}".strip(),
             format_html_join("", "<div><code>{}</code>: {} → {}</div>",
                              ((name, old, new) for name, (old, new) in (entry.changes or {}).items()))
             or entry.detail or "-")
            for entry in entries))
        if not rows:
            return "Nothing recorded yet."
        link = reverse("admin:audit_auditentry_changelist") + f"?job__id__exact={job.pk}"
        return format_html("<table><tr><th>when</th><th>who</th><th>action</th><th>from</th><th>what changed</th></tr>"
                           "{}</table><a href='{}'>the whole trail</a>", rows, link)

    @admin.display(description="last run", ordering="last_run__status")
    def last_run_status(self, job):
        run = job.last_run
        return run_link(run, status_badge(run.status)) if run else "-"

    # --- the audit trail of saves and deletes

    def save_model(self, request, obj, form, change):
        before = None
        if change:
            stored = Job.objects.select_related("crontab", "interval", "clocked", "owner", "group").get(pk=obj.pk)
            before = trail.snapshot(stored)
        super().save_model(request, obj, form, change)
        changes = trail.diff(before, trail.snapshot(obj))
        if changes or not change:
            trail.record(obj, "change" if change else "create", Source.ADMIN, request=request, changes=changes)

    def delete_model(self, request, obj):
        trail.record(obj, "delete", Source.ADMIN, request=request, changes=trail.diff(trail.snapshot(obj), None))
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for job in queryset.select_related("crontab", "interval", "clocked", "owner", "group"):
            trail.record(job, "delete", Source.ADMIN, request=request, changes=trail.diff(trail.snapshot(job), None))
        super().delete_queryset(request, queryset)

    # --- actions

    @admin.action(description="Run now")
    def run_selected_now(self, request, queryset):
        started = []
        for job in queryset:
            started.append(runs.run_now(job, user=request.user))
            trail.record(job, "run_now", Source.ADMIN, request=request, run=started[-1])
        ids = ", ".join(f"#{run.pk}" for run in started)
        self.message_user(request, f"Started {len(started)} run(s): {ids}.", messages.SUCCESS)

    @admin.action(description="Pause")
    def pause_selected(self, request, queryset):
        jobs = list(queryset)
        for job in jobs:
            definitions.pause(job)
            trail.record(job, "pause", Source.ADMIN, request=request)
        self.message_user(request, f"Paused {len(jobs)} job(s).", messages.SUCCESS)

    @admin.action(description="Resume")
    def resume_selected(self, request, queryset):
        jobs = list(queryset)
        for job in jobs:
            definitions.resume(job)
            trail.record(job, "resume", Source.ADMIN, request=request)
        self.message_user(request, f"Resumed {len(jobs)} job(s).", messages.SUCCESS)

    @admin.action(description="Clone (disabled copy)")
    def clone_selected(self, request, queryset):
        copies = [clone_job(job) for job in queryset]
        for copy in copies:
            trail.record(copy, "create", Source.ADMIN, request=request, changes=trail.diff(None, trail.snapshot(copy)),
                         detail="cloned")
        names = ", ".join(copy.name for copy in copies)
        self.message_user(request, f"Created {len(copies)} disabled copy(ies): {names}.", messages.SUCCESS)


def clone_job(job):
    """A disabled copy of ``job`` named "<name> (copy)", sharing its schedule rows."""
    base = f"{job.name} (copy)"
    name, n = base, 1
    while Job.objects.filter(name=name).exists():
        n += 1
        name = f"{job.name} (copy {n})"
    job.pk = job.id = None
    job._state.adding = True
    job.name, job.enabled, job.last_run = name, False, None
    job.save()
    return job


class AttemptInline(ReadOnlyInline):
    model = JobAttempt
    fields = ("number", "outcome", "worker", "pid", "started_at", "finished_at", "heartbeat_at", "error",
              "traceback_pre")
    readonly_fields = fields

    @admin.display(description="traceback")
    def traceback_pre(self, attempt):
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", attempt.traceback) if attempt.traceback else ""


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ("id", "job", "status_badge", "trigger", "attempts", "scheduled_for", "started_at",
                    "duration", "worker")
    list_display_links = ("id",)
    list_filter = ("status", "trigger", ("job", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("job",)
    date_hierarchy = "created_at"
    search_fields = ("job__name", "worker")
    inlines = [AttemptInline]
    actions = ("cancel_selected",)
    fieldsets = [
        (None, {"fields": ["job_link", "status_badge", "trigger", "triggered_by", "reason", "attempts",
                           "worker", "flower_link"]}),
        ("Timings", {"fields": ["scheduled_for", "created_at", "queued_at", "started_at", "finished_at",
                                "duration", "heartbeat_at", "next_attempt_at", "publish_count"]}),
        ("Outcome", {"fields": ["output_pre", "output_bytes", "result", "error_pre"]}),
    ]
    readonly_fields = ("job_link", "status_badge", "trigger", "triggered_by", "reason", "attempts", "worker",
                       "flower_link", "scheduled_for", "created_at", "queued_at", "started_at", "finished_at",
                       "duration", "heartbeat_at", "next_attempt_at", "publish_count", "output_pre",
                       "output_bytes", "result", "error_pre")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # Runs are history: the page is read-only; people act on runs through the actions.
        return False

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_cancel_permission(self, request):
        return request.user.has_perm("jobs.change_jobrun")

    @admin.display(description="job", ordering="job__name")
    def job_link(self, run):
        url = reverse("admin:jobs_job_change", args=[run.job_id])
        return format_html('<a href="{}">{}</a>', url, run.job.name)

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return status_badge(run.status)

    @admin.display(description="attempt")
    def attempts(self, run):
        return f"{run.attempt}/{run.max_attempts}"

    @admin.display(description="duration")
    def duration(self, run):
        return format_duration(run.duration)

    @admin.display(description="Flower")
    def flower_link(self, run):
        url = f"{settings.FLOWER_URL.rstrip('/')}/task/{run.task_id}"
        return format_html('<a href="{}" target="_blank" rel="noopener">{}</a>', url, run.task_id)

    @admin.display(description="output")
    def output_pre(self, run):
        return format_html("<pre style='white-space:pre-wrap;max-height:40em;overflow:auto'>{}</pre>",
                           run.output) if run.output else "(no output)"

    @admin.display(description="error")
    def error_pre(self, run):
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", run.error) if run.error else "-"

    @admin.action(description="Cancel", permissions=["cancel"])
    def cancel_selected(self, request, queryset):
        cancelled = []
        for run in queryset.select_related("job"):
            if runs.cancel(run, reason=f"cancelled by {request.user}"):
                cancelled.append(run.pk)
                trail.record(run.job, "cancel", Source.ADMIN, request=request, run=run)
        skipped = queryset.count() - len(cancelled)
        text = f"Cancelled {len(cancelled)} run(s)"
        if cancelled:
            text += ": " + ", ".join(f"#{pk}" for pk in cancelled)
        if skipped:
            text += f"; {skipped} had already finished"
        self.message_user(request, text + ".", messages.SUCCESS if cancelled else messages.WARNING)
