"""The Django admin for jobs and their runs: define and schedule jobs, trigger them, read history."""

from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.forms.models import BaseInlineFormSet
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from audit.models import Source

from .. import kinds
from ..access import secrets
from ..actions import jobs as actions
from ..actions.jobs import create as create_job
from ..actions.jobs import delete as delete_job
from ..actions.jobs import edit as edit_job
from ..actions.permissions import may_act_on
from ..definitions import fields as job_fields
from ..models import Job, JobAttempt, JobRun, RunStatus, ScheduleType
from ..pages import params_form
from . import beat as beat_admin  # noqa: F401  (beat_admin: periodic tasks' actions get permissions)
from .forms import SCHEDULE_FIELDS, JobAdminForm
from .through_actions import ThroughActions, refused_as_message

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


def kind_fieldsets():
    """A fieldset of each kind's own fields, titled with the kinds; a field several kinds use shows once."""
    return [(f"{labels} only", {"fields": fields}) for _, labels, fields in kinds.fieldsets()]


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
class JobAdmin(ThroughActions, admin.ModelAdmin):
    form = JobAdminForm
    list_display = ("name", "kind", "schedule", "enabled", "next_run_at", "last_run_status", "owner")
    list_filter = ("kind", "enabled", "schedule_type")
    list_select_related = ("crontab", "interval", "clocked", "owner", "last_run")
    search_fields = ("name", "target", "description")
    actions = ("run_selected_now", "run_with_parameters", "pause_selected", "resume_selected", "clone_selected")
    readonly_fields = ("schedule_in_words", "upcoming_runs", "last_run_summary", "next_run_at", "audit_trail",
                       "masked_secret_environment", "masked_secret_http_headers", "consecutive_failures",
                       "paused_reason")
    save_on_top = True

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.user = request.user  # a class made for this request
        return form

    def get_changeform_initial_data(self, request):
        # The add form shows what actions.create does with no owner: the creator owns the job.
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    # A command job is read-only, and cannot be deleted, without run_command_jobs.
    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and (obj is None or may_act_on(request.user, obj))

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (obj is None or may_act_on(request.user, obj))

    def has_run_permission(self, request):
        return request.user.has_perm("jobs.change_job")

    @admin.display(description="secret environment")
    def masked_secret_environment(self, job):
        return secrets.masked(job.secret_environment) or "-"

    @admin.display(description="secret HTTP headers")
    def masked_secret_http_headers(self, job):
        return secrets.masked(job.secret_http_headers) or "-"

    def get_fieldsets(self, request, obj=None):
        # Read-only pages show the secret fields masked (an editable form masks them itself).
        editable = self.has_change_permission(request, obj) if obj else self.has_add_permission(request)
        shown = {} if editable else {name: f"masked_{name}" for name in secrets.FIELDS}
        return [(title, {"fields": [shown.get(name, name) for name in options["fields"]]})
                for title, options in self.fieldsets_for(obj)]

    def fieldsets_for(self, obj):
        """The groups of jobs.definitions.fields, the schedule as the form's fields, each kind's own fields
        apart (a field several kinds use, once), and what a saved job shows besides."""
        schedule = [*SCHEDULE_FIELDS]
        if obj is not None:
            schedule += ["schedule_in_words", "next_run_at", "upcoming_runs", "last_run_summary"]
        fieldsets = []
        for group in job_fields.GROUPS:
            fieldsets.append((group.title, {"fields": [
                part for name in job_fields.common(group) for part in (schedule if name == "schedule" else [name])]}))
            if set(group.fields) & set(job_fields.KIND_FIELDS):
                fieldsets += kind_fieldsets()
        if obj is not None:
            # What the service keeps as the job's runs end (auto-pause, pause_after_failures).
            fieldsets.append(("Failures in a row", {"fields": ["consecutive_failures", "paused_reason"]}))
            fieldsets.append(("Audit trail", {"fields": ["audit_trail"]}))
        return fieldsets

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

    # --- saves, deletes and actions: each through jobs.actions (which writes the audit entry)

    # (The form has set the fields and applied the schedule on the job already when it is saved.)
    create, edit, delete = staticmethod(create_job), staticmethod(edit_job), staticmethod(delete_job)

    def deleted(self, queryset):
        return queryset.select_related("crontab", "interval", "clocked", "owner", "group")

    def changeform_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changeform_view, request, *args, **kwargs)

    def delete_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().delete_view, request, *args, **kwargs)

    def changelist_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changelist_view, request, *args, **kwargs)

    @admin.action(description="Run now", permissions=["run"])
    def run_selected_now(self, request, queryset):
        started = each(request, queryset, actions.run_now)
        ids = ", ".join(f"#{run.pk}" for run in started)
        self.message_user(request, f"Started {len(started)} run(s): {ids}.", messages.SUCCESS)

    @admin.action(description="Run now with parameters…", permissions=["run"])
    def run_with_parameters(self, request, queryset):
        """One job: a form of its parameters (built from its declaration); with ``apply``, run it now with
        the values given. A bad value comes back on its parameter, and nothing is queued."""
        jobs = list(queryset[:2])
        if len(jobs) != 1:
            self.message_user(request, "Select one job to run with parameters.", messages.WARNING)
            return None
        job, given, errors, other = jobs[0], {}, {}, []
        if request.POST.get("apply"):
            given = params_form.submitted(request.POST)
            try:
                run = actions.run_now(actions.Actor.of_request(request, Source.ADMIN), job, given)
            except actions.ActionError as exc:
                if exc.kind != actions.ActionError.INVALID:
                    raise
                errors, other = params_form.split_errors(exc.fields)
            else:
                self.message_user(request, f"Started run #{run.pk} of {job.name} with {run.params or 'no parameters'}.",
                                  messages.SUCCESS)
                return None
        return TemplateResponse(request, "admin/jobs/run_with_params.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta, "job": job,
            "inputs": params_form.inputs(job, given if request.POST.get("apply") else None, errors), "errors": other,
        })

    @admin.action(description="Pause", permissions=["change"])
    def pause_selected(self, request, queryset):
        self.message_user(request, f"Paused {len(each(request, queryset, actions.pause))} job(s).", messages.SUCCESS)

    @admin.action(description="Resume", permissions=["change"])
    def resume_selected(self, request, queryset):
        self.message_user(request, f"Resumed {len(each(request, queryset, actions.resume))} job(s).",
                          messages.SUCCESS)

    @admin.action(description="Clone (disabled copy)", permissions=["add"])
    def clone_selected(self, request, queryset):
        copies = each(request, queryset, actions.clone)
        names = ", ".join(copy.name for copy in copies)
        self.message_user(request, f"Created {len(copies)} disabled copy(ies): {names}.", messages.SUCCESS)


def each(request, objects, action):
    """Apply ``action`` to every selected object, all in one transaction: a refusal changes none."""
    actor = actions.Actor.of_request(request, Source.ADMIN)
    with transaction.atomic():
        return [action(actor, obj) for obj in objects]


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
        (None, {"fields": ["job_link", "status_badge", "trigger", "triggered_by", "params", "reason", "attempts",
                           "worker", "flower_link"]}),
        ("Timings", {"fields": ["scheduled_for", "created_at", "queued_at", "started_at", "finished_at",
                                "duration", "heartbeat_at", "next_attempt_at", "publish_count"]}),
        ("Outcome", {"fields": ["output_pre", "output_bytes", "result", "error_pre"]}),
    ]
    readonly_fields = ("job_link", "status_badge", "trigger", "triggered_by", "params", "reason", "attempts", "worker",
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

    def changelist_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changelist_view, request, *args, **kwargs)

    @admin.action(description="Cancel", permissions=["cancel"])
    def cancel_selected(self, request, queryset):
        selected = list(queryset.select_related("job"))
        cancelled = [run.pk for run, done in zip(selected, each(request, selected, actions.cancel), strict=True)
                     if done]
        skipped = len(selected) - len(cancelled)
        text = f"Cancelled {len(cancelled)} run(s)"
        if cancelled:
            text += ": " + ", ".join(f"#{pk}" for pk in cancelled)
        if skipped:
            text += f"; {skipped} had already finished"
        self.message_user(request, text + ".", messages.SUCCESS if cancelled else messages.WARNING)
