"""The pages: overview, jobs, one job, runs, one run (with a live tail), and the buttons that act.

Every page shows only what the API would show the same user (``visible_jobs``/``visible_runs``);
another user's job or run answers 404, so ids do not leak what exists.
"""

from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_POST

from audit import trail
from audit.models import Source
from notifications.models import Channel, Delivery
from notifications.sending import send_test_notification

from .. import definitions, runs
from ..api.permissions import may_manage_command_jobs, visible_jobs, visible_runs
from ..api.views import with_tag
from ..models import JobKind, RunStatus, ScheduleType
from . import charts, queries

JOBS_PER_PAGE = 50
RUNS_PER_PAGE = 50
JOB_RUNS_PER_PAGE = 25
JOB_CHOICES = 200
CHART_RUNS = 100
AUDIT_ON_JOB_PAGE = 20


def page(request, template, context, section):
    context.update(section=section, flower_url=settings.FLOWER_URL.rstrip("/"))
    return render(request, template, context)


def paginate(request, items, per_page):
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def may_act_on(user, job):
    """Whoever sees a job may run, pause and resume it; a command job also needs the right to
    manage command jobs, as in the API."""
    return job.kind != JobKind.COMMAND or may_manage_command_jobs(user)


def with_timings(run_list, now=None):
    now = now or timezone.now()
    for run in run_list:
        if run.duration is not None:
            run.took = charts.human_seconds(run.duration.total_seconds())
        elif run.started_at and not run.is_terminal:
            run.took = f"{charts.human_seconds((now - run.started_at).total_seconds())} so far"
        else:
            run.took = "—"
    return run_list


def job_timezone(job):
    if job.schedule_type == ScheduleType.CRON and job.crontab:
        return str(job.crontab.timezone)
    return settings.TIME_ZONE


# --- overview


@login_required
def overview(request):
    context = queries.overview(visible_runs(request.user), visible_jobs(request.user))
    for run in context["running"]:
        run.elapsed_text = charts.human_seconds(run.elapsed)
        run.sla_text = charts.human_seconds(run.job.sla_seconds) if run.job.sla_seconds else None
    if request.GET.get("fragment"):
        return render(request, "pages/_overview.html", context)
    return page(request, "pages/overview.html", context, "overview")


# --- jobs


def filtered_jobs(request):
    jobs = visible_jobs(request.user).select_related("last_run", "crontab", "interval", "clocked")
    params = request.GET
    if name := params.get("q", "").strip():
        jobs = jobs.filter(name__icontains=name)
    if (kind := params.get("kind")) in JobKind.values:
        jobs = jobs.filter(kind=kind)
    if tag := params.get("tag", "").strip():
        jobs = with_tag(jobs, tag)
    if (enabled := params.get("enabled")) in ("yes", "no"):
        jobs = jobs.filter(enabled=enabled == "yes")
    status = params.get("status")
    if status in RunStatus.values:
        jobs = jobs.filter(last_run__status=status)
    elif status == "never":
        jobs = jobs.filter(last_run__isnull=True)
    return jobs


@login_required
def job_list(request):
    found = paginate(request, filtered_jobs(request), JOBS_PER_PAGE)
    ids = [job.pk for job in found]
    rates = queries.success_rates(ids)
    durations = queries.recent_durations(ids)
    for job in found:
        job.success_rate = queries.rate_text(*rates.get(job.pk, (0, 0)))
        job.sparkline = charts.sparkline(durations.get(job.pk, []))
    return page(request, "pages/jobs.html", {
        "jobs": found, "kinds": JobKind.choices, "statuses": RunStatus.values, "params": request.GET,
    }, "jobs")


@login_required
def job_detail(request, pk):
    job = get_object_or_404(
        visible_jobs(request.user).select_related("owner", "group", "last_run", "crontab", "interval", "clocked"),
        pk=pk,
    )
    history = job.runs.all()
    status = request.GET.get("status")
    if status in RunStatus.values:
        history = history.filter(status=status)
    history = paginate(request, history, JOB_RUNS_PER_PAGE)
    with_timings(history)
    points = queries.recent_durations([job.pk], per_job=CHART_RUNS).get(job.pk, [])
    week = queries.success_rates([job.pk]).get(job.pk, (0, 0))
    last_50 = list(job.runs.filter(status__in=queries.FINISHED_STATUSES).values_list("status", flat=True)[:50])
    tzname = job_timezone(job)
    return page(request, "pages/job_detail.html", {
        "job": job,
        "tzname": tzname,
        "upcoming": [slot.astimezone(ZoneInfo(tzname)) for slot in job.upcoming_slots(10)],
        "runs": history,
        "status": status,
        "statuses": RunStatus.values,
        "chart": charts.duration_chart(points, job.sla_seconds),
        "week_rate": queries.rate_text(*week),
        "week_finished": week[1],
        "last_50_rate": queries.rate_text(last_50.count(RunStatus.SUCCEEDED), len(last_50)),
        "last_50_count": len(last_50),
        "may_act": may_act_on(request.user, job),
        "audit": job.audit.order_by("-created_at", "-id")[:AUDIT_ON_JOB_PAGE],
        "why_at": request.GET.get("why", ""),
        "why": why_line(job, request.GET.get("why", ""), tzname),
        "timeout_text": charts.human_seconds(job.timeout_seconds),
        "sla_text": charts.human_seconds(job.sla_seconds) if job.sla_seconds else None,
    }, "jobs")


def why_line(job, text, tzname):
    from .operator_views import why_line

    return why_line(job, text, tzname)


def job_to_act_on(request, pk):
    job = get_object_or_404(visible_jobs(request.user), pk=pk)
    if not may_act_on(request.user, job):
        raise PermissionDenied("Only staff or users with the jobs.change_job permission may act on command jobs.")
    return job


@login_required
@require_POST
@transaction.atomic  # the action and its audit entry, together or not at all
def job_run_now(request, pk):
    job = job_to_act_on(request, pk)
    run = runs.run_now(job, user=request.user)
    trail.record(job, "run_now", Source.PAGE, request=request, run=run)
    messages.success(request, f"Run #{run.pk} of {job.name} is queued.")
    return redirect("pages:run", pk=run.pk)


@login_required
@require_POST
@transaction.atomic  # the action and its audit entry, together or not at all
def job_pause(request, pk):
    job = job_to_act_on(request, pk)
    definitions.pause(job)
    trail.record(job, "pause", Source.PAGE, request=request)
    messages.success(request, f"{job.name} is paused: its schedule will not start runs until resumed.")
    return redirect("pages:job", pk=job.pk)


@login_required
@require_POST
@transaction.atomic  # the action and its audit entry, together or not at all
def job_resume(request, pk):
    job = job_to_act_on(request, pk)
    definitions.resume(job)
    trail.record(job, "resume", Source.PAGE, request=request)
    messages.success(request, f"{job.name} is resumed.")
    return redirect("pages:job", pk=job.pk)


# --- runs


@login_required
def run_list(request):
    found = visible_runs(request.user).select_related("job")
    params = request.GET
    job_id = params.get("job", "")
    if job_id.isdigit():
        found = found.filter(job_id=int(job_id))
    if (status := params.get("status")) in RunStatus.values:
        found = found.filter(status=status)
    found = paginate(request, found, RUNS_PER_PAGE)
    with_timings(found)
    # A <select> of 10,000 jobs took ~100 ms to render (bench/pages.py): past JOB_CHOICES jobs the
    # filter is a job id field instead.
    jobs = list(visible_jobs(request.user).values_list("pk", "name")[:JOB_CHOICES + 1])
    return page(request, "pages/runs.html", {
        "runs": found,
        "statuses": RunStatus.values,
        "jobs": jobs if len(jobs) <= JOB_CHOICES else None,
        "params": params,
        "job_id": int(job_id) if job_id.isdigit() else None,
    }, "runs")


def visible_run(request, pk):
    return get_object_or_404(visible_runs(request.user).select_related("job", "triggered_by"), pk=pk)


def run_live_context(request, run):
    with_timings([run])
    attempts = list(run.attempts.all())
    for attempt in attempts:
        if attempt.finished_at:
            attempt.took = charts.human_seconds((attempt.finished_at - attempt.started_at).total_seconds())
    return {
        "run": run,
        "attempts": attempts,
        "may_act": may_act_on(request.user, run.job),
        "flower_task_url": f"{settings.FLOWER_URL.rstrip('/')}/task/{run.task_id}",
    }


@login_required
def run_detail(request, pk):
    run = visible_run(request, pk)
    context = run_live_context(request, run)
    context["deliveries"] = Delivery.objects.filter(run=run).select_related("channel").order_by("created_at")
    return page(request, "pages/run_detail.html", context, "runs")


@login_required
def run_tail(request, pk):
    """What the run page polls while the run is not finished: its status, output and the live part
    of the page, rendered again."""
    run = visible_run(request, pk)
    html = render_to_string("pages/_run_live.html", run_live_context(request, run), request=request)
    return JsonResponse({
        "id": run.pk, "status": run.status, "terminal": run.is_terminal, "attempt": run.attempt,
        "output": run.output, "error": run.error, "html": html,
    })


@login_required
@require_POST
@transaction.atomic  # the action and its audit entry, together or not at all
def run_cancel(request, pk):
    run = visible_run(request, pk)
    if not may_act_on(request.user, run.job):
        raise PermissionDenied("Only staff or users with the jobs.change_job permission may act on command jobs.")
    if runs.cancel(run, reason=f"Cancelled by {request.user.get_username()} from the run page"):
        trail.record(run.job, "cancel", Source.PAGE, request=request, run=run)
        messages.success(request, f"Run #{run.pk} is cancelled.")
    else:
        messages.info(request, f"Run #{run.pk} is already {run.status}; nothing changed.")
    return redirect("pages:run", pk=run.pk)


# --- notification channels (staff: channels are shared by everyone's jobs)


def staff_only(request):
    if not request.user.is_staff:
        raise Http404("No such page.")


@login_required
def channel_list(request):
    staff_only(request)
    channels = Channel.objects.order_by("name")
    return page(request, "pages/channels.html", {"channels": channels}, "channels")


@login_required
@require_POST
def channel_test(request, pk):
    staff_only(request)
    sent, text = send_test_notification(get_object_or_404(Channel, pk=pk))
    (messages.success if sent else messages.error)(request, text)
    return redirect("pages:channels")
