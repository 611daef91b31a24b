"""The pages: overview, jobs, one job, runs, one run (with a live tail), and the buttons that act.

Every page shows only what the API would show the same user (``visible_jobs``/``visible_runs``);
another user's job or run answers 404, so ids do not leak what exists.
"""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.exceptions import ValidationError

from audit import trail

from .. import kinds
from ..actions import jobs as actions
from ..actions.permissions import sees_everything, visible_jobs, visible_runs
from ..actions.versions import JOBS
from ..api.filters import with_tag
from ..api.views import param_filters, with_params
from ..definitions import jobs as definitions
from ..kinds.base import result_as_json
from ..lifecycle import limits
from ..models import ACTIVE_STATUSES, RunStatus
from ..models.window import active_or_next
from ..operations.reports import job_report
from . import charts, figures, keyset, params_form, queries, versions
from .common import actor, flower_url, job_timezone, may_act_on, page, refused_is_forbidden, slot_text
from .operator_views import why_line
from .reports import heat_map

JOBS_PER_PAGE = 50
RUNS_PER_PAGE = 50
JOB_RUNS_PER_PAGE = 25
JOB_CHOICES = 200
SPARKLINE_RUNS = 20
CHART_RUNS = 100
RATE_RUNS = 50
AUDIT_ON_JOB_PAGE = 20
ON_TIME_DAYS = 28  # the job page's heat map: four weeks
# What a table of runs shows (templates/pages/_runs_table.html): not the output, result or error,
# up to megabytes a run.
RUNS_TABLE_FIELDS = ("job", "status", "trigger", "scheduled_for", "created_at", "started_at", "finished_at",
                     "attempt", "max_attempts", "worker", "waiting_since", "waited_seconds")
LAST_RUN_UNSHOWN = ("last_run__output", "last_run__result", "last_run__error", "last_run__reason")


def paginate(request, items, per_page):
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def with_timings(run_list, now=None):
    now = now or timezone.now()
    for run in run_list:
        if run.duration is not None:
            run.took = charts.human_seconds(run.duration.total_seconds())
        elif run.started_at and not run.is_terminal:
            run.took = f"{charts.human_seconds((now - run.started_at).total_seconds())} so far"
        else:
            run.took = "—"
        # How long it waited for room under its job's limit (where the list loaded it).
        loaded = {"waiting_since", "waited_seconds"}.isdisjoint(run.get_deferred_fields())
        waited = run.waited_seconds + (max((now - run.waiting_since).total_seconds(), 0) if run.waiting_since else 0) \
            if loaded else 0
        run.waited = charts.human_seconds(waited) if waited else ""
        run.waits = loaded and run.waiting_since is not None and run.status == RunStatus.QUEUED
    return run_list


# --- overview


@login_required
def overview(request):
    context = queries.overview(visible_runs(request.user), visible_jobs(request.user),
                               sees_all=sees_everything(request.user))
    for run in context["running"]:
        run.elapsed_text = charts.human_seconds(run.elapsed)
        run.sla_text = charts.human_seconds(run.job.sla_seconds) if run.job.sla_seconds else None
    if request.GET.get("fragment"):
        return render(request, "pages/_overview.html", context)
    return page(request, "pages/overview.html", context, "overview")


# --- jobs


def filtered_jobs(request):
    jobs = visible_jobs(request.user).select_related("last_run", "crontab", "interval", "clocked").defer(
        *LAST_RUN_UNSHOWN)
    params = request.GET
    if name := params.get("q", "").strip():
        jobs = jobs.filter(name__icontains=name)
    if (kind := params.get("kind")) in kinds.names():
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
    rates = figures.success_rates(ids, timezone.now())
    durations = figures.recent_durations(ids, SPARKLINE_RUNS)
    for job in found:
        job.success_rate = figures.rate_text(*rates.get(job.pk, (0, 0)))
        job.sparkline = charts.sparkline(durations.get(job.pk, []))
    return page(request, "pages/jobs.html", {
        "jobs": found, "kinds": kinds.choices(), "statuses": RunStatus.values, "params": request.GET,
    }, "jobs")


def maintenance_window(job):
    """(window, start, end, on now) of the maintenance window of the job on now or next, or None."""
    now = timezone.now()
    for window, (start, end) in active_or_next(job.pk, now):
        return window, start, end, start <= now
    return None


@login_required
def job_detail(request, pk):
    job = get_object_or_404(
        visible_jobs(request.user).select_related("owner", "group__ping_key", "crontab", "interval", "clocked"),
        pk=pk,
    )
    history = job.runs.only(*RUNS_TABLE_FIELDS)
    status = request.GET.get("status")
    if status in RunStatus.values:
        history = history.filter(status=status)
    history = keyset.page(history, request.GET, JOB_RUNS_PER_PAGE)
    with_timings(history)
    points = figures.recent_durations([job.pk], CHART_RUNS).get(job.pk, [])
    week = figures.success_rates([job.pk], timezone.now()).get(job.pk, (0, 0))
    last_50 = [point[2] for point in points[-RATE_RUNS:]]
    tzname = job_timezone(job)
    month = job_report(job, ON_TIME_DAYS)
    return page(request, "pages/job_detail.html", {
        "on_time": month, "weeks": heat_map(month), "on_time_days": ON_TIME_DAYS,
        "job": job,
        "tzname": tzname,
        "window": maintenance_window(job),
        "upcoming": [(slot_text(slot, tzname), slot) for slot in job.upcoming_slots(10)],
        "dst_preview": definitions.dst_preview(job),
        "runs": history,
        "status": status,
        "statuses": RunStatus.values,
        "chart": charts.duration_chart(points, job.sla_seconds, tzname=tzname),
        "week_rate": figures.rate_text(*week),
        "week_finished": week[1],
        "last_50_rate": figures.rate_text(last_50.count(RunStatus.SUCCEEDED), len(last_50)),
        "last_50_count": len(last_50),
        "may_act": may_act_on(request, job),
        "snoozed": job.snoozed_until is not None and job.snoozed_until > timezone.now(),
        "snooze_spans": SNOOZE_SPANS,
        "audit": trail.shown_to(request.user, job.audit.order_by("-created_at", "-id")[:AUDIT_ON_JOB_PAGE]),
        "why_at": request.GET.get("why", ""),
        "why": why_line(job, request.GET.get("why", ""), tzname),
        "timeout_text": charts.human_seconds(job.timeout_seconds),
        "sla_text": charts.human_seconds(job.sla_seconds) if job.sla_seconds else None,
        **versions.context(job, request.GET, JOBS, "pages:job-version-restore"),
    }, "jobs")


def visible_job(request, pk):
    return get_object_or_404(visible_jobs(request.user), pk=pk)


@login_required
@require_http_methods(["GET", "POST"])
@refused_is_forbidden
def job_run_now(request, pk):
    """GET: the form of the job's parameters (the run-now button of a job that has some leads
    here). POST: run the job now with the values given (none: the defaults); a bad value comes back
    on its input, and nothing is queued."""
    job = visible_job(request, pk)
    given = params_form.submitted(request.POST) if request.method == "POST" else {}
    errors, other = {}, []
    if request.method == "POST":
        try:
            run = actions.run_now(actor(request), job, given)
        except actions.ActionError as exc:
            if exc.kind != actions.ActionError.INVALID:
                raise
            errors, other = params_form.split_errors(exc.fields)
        else:
            # Worded to stay true while the page follows the run to its end (the status below is live).
            messages.success(request, f"Run now: run #{run.pk} of {job.name} was created; its status below follows it.")
            return redirect("pages:run", pk=run.pk)
    response = page(request, "pages/job_run.html", {
        "job": job, "inputs": params_form.inputs(job, given if request.method == "POST" else None, errors),
        "errors": other, "may_act": may_act_on(request, job)}, "jobs")
    if errors or other:
        response.status_code = 400
    return response


@login_required
@require_POST
@refused_is_forbidden
def job_pause(request, pk):
    return switched(request, pk, actions.pause, "{} is paused: its schedule will not start runs until resumed.")


@login_required
@require_POST
@refused_is_forbidden
def job_resume(request, pk):
    return switched(request, pk, actions.resume, "{} is resumed.")


# What the job page offers to snooze a job for: seconds -> words.
SNOOZE_SPANS = {"3600": "1 hour", "14400": "4 hours", "86400": "1 day", "604800": "1 week", "2592000": "30 days"}


@login_required
@require_POST
@refused_is_forbidden
def job_snooze(request, pk):
    job = visible_job(request, pk)
    span = request.POST.get("for", "")
    if span not in SNOOZE_SPANS:
        messages.error(request, f"Snooze for one of: {', '.join(SNOOZE_SPANS.values())}.")
        return redirect("pages:job", pk=job.pk)
    until = timezone.now() + timedelta(seconds=int(span))
    actions.snooze(actor(request), job, until)
    messages.success(request, f"{job.name} is snoozed for {SNOOZE_SPANS[span]}: no notification of it until "
                              f"{until:%Y-%m-%d %H:%M} UTC.")
    return redirect("pages:job", pk=job.pk)


@login_required
@require_POST
@refused_is_forbidden
def job_unsnooze(request, pk):
    return switched(request, pk, actions.unsnooze, "{} is no longer snoozed: its notifications are sent again.")


def switched(request, pk, switch, says):
    """Pause or resume (``switch``) the job ``pk``; back to its page, which ``says`` (of its name) so."""
    job = switch(actor(request), visible_job(request, pk))
    messages.success(request, says.format(job.name))
    return redirect("pages:job", pk=job.pk)


# --- runs


@login_required
def run_list(request):
    found = visible_runs(request.user).select_related("job").only(*RUNS_TABLE_FIELDS, "job__name")
    params = request.GET
    job_id = params.get("job", "")
    if job_id.isdigit():
        found = found.filter(job_id=int(job_id))
    # Filters on the values of the chosen job's parameters (the API's param.<name>, an empty one ignored).
    declared = (visible_jobs(request.user).filter(pk=int(job_id)).values_list("parameters", flat=True).first()
                if job_id.isdigit() else None) or []
    wanted = {name: text for name, text in param_filters(params).items() if text.strip()}
    filter_error = None
    if wanted:
        try:
            found = with_params(found, request.user, params, wanted)
        except ValidationError as exc:
            filter_error = " ".join(f"{key}: {' '.join(texts)}" for key, texts in exc.detail.items())
            found = found.none()
    if (status := params.get("status")) in RunStatus.values:
        found = found.filter(status=status)
    # Job by job (keyset.first) for a user who does not see every job, unless one job is asked for
    # (its own index then) or an active status (run_active_idx holds only the runs in flight).
    by_job = not (sees_everything(request.user) or job_id.isdigit() or status in ACTIVE_STATUSES)
    found = keyset.page(found, params, RUNS_PER_PAGE, jobs=visible_jobs(request.user) if by_job else None)
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
        "param_inputs": [(p["name"], p["type"], params.get(f"param.{p['name']}", "")) for p in declared],
        "filter_error": filter_error,
    }, "runs")


def visible_run(request, pk):
    return get_object_or_404(visible_runs(request.user).select_related("job", "triggered_by"), pk=pk)


def run_live_context(request, run):
    with_timings([run])
    attempts = list(run.attempts.all())
    for attempt in attempts:
        if attempt.finished_at:
            attempt.took = charts.human_seconds((attempt.finished_at - attempt.started_at).total_seconds())
    # The run's started_at is its last attempt's: over several attempts, the whole run is from the
    # first attempt's start to the end.
    whole_run = None
    if len(attempts) > 1 and run.finished_at:
        whole_run = charts.human_seconds((run.finished_at - attempts[0].started_at).total_seconds())
    now = timezone.now()
    # The wait for room under the job's limit: over, and (while it waits) so far.
    waited = run.waited_seconds + (max((now - run.waiting_since).total_seconds(), 0) if run.waiting_since else 0)
    return {
        "run": run,
        "attempts": attempts,
        "whole_run_took": whole_run,
        "waiting_for": limits.waiting_for(run, now),
        "waited": charts.human_seconds(waited) if waited else "",
        "result_text": result_text(run),
        "result_title": spec.result_title if (spec := kinds.get(run.job.kind)) else "Result",
        "may_act": may_act_on(request, run.job),
        # (The last attempt's message: a bundle's, when it ran in one.)
        "flower_task_url": (f"{flower}/task/{attempts[-1].task_id if attempts else run.task_id}"
                            if (flower := flower_url(request.user)) else ""),
    }


def result_text(run):
    """What a run returned, as the run page shows it above the output (as its kind shows it: an HTTP
    job's status and headers, a function's return value as JSON); None when there is nothing to show."""
    result = run.result
    if result is None:
        return None
    spec = kinds.get(run.job.kind)
    return spec.result_text(result) if spec else result_as_json(result)


@login_required
def run_detail(request, pk):
    run = visible_run(request, pk)
    return page(request, "pages/run_detail.html", run_live_context(request, run), "runs")


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
@refused_is_forbidden
def run_cancel(request, pk):
    run = visible_run(request, pk)
    if actions.cancel(actor(request), run):
        messages.success(request, f"Run #{run.pk} is cancelled.")
    else:
        messages.info(request, f"Run #{run.pk} is already {run.status}; nothing changed.")
    return redirect("pages:run", pk=run.pk)


@login_required
@require_POST
@refused_is_forbidden
def run_rerun(request, pk):
    """Over a quota of runs: the 429 page naming it (``refused_is_forbidden``); a run not finished:
    back to its page, which says so."""
    run = visible_run(request, pk)
    try:
        actions.rerun(actor(request), run)
    except actions.ActionError as exc:
        if exc.kind != actions.ActionError.CONFLICT:
            raise
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Run #{run.pk} is queued again as attempt {run.attempt}.")
    return redirect("pages:run", pk=run.pk)
