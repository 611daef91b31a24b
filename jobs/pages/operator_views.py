"""The operator's pages of a job: every slot of a range accounted for, "why didn't it run at …?",
and backfill (a dry run first, then confirm)."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone

from ..actions import jobs as actions
from ..actions.permissions import visible_jobs
from ..operations import slot_report
from . import params_form
from .common import actor, counted, job_timezone, page, refused_is_forbidden, slot_text

LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends


def local_moment(text, tzname):
    """A datetime-local value read in the job's timezone; None when it is not one."""
    try:
        naive = datetime.strptime(text.strip()[:16], LOCAL_FORMAT)
    except ValueError:
        return None
    # Far from the edges of datetime, so the ranges built around it cannot overflow.
    return naive.replace(tzinfo=ZoneInfo(tzname)) if 1900 <= naive.year <= 9000 else None


def local_text(moment, tzname):
    return moment.astimezone(ZoneInfo(tzname)).strftime(LOCAL_FORMAT)


def why_line(job, text, tzname):
    if not text:
        return ""
    moment = local_moment(text, tzname)
    if moment is None:
        return "Give a date and time, such as 2026-11-21T03:00."
    try:
        return slot_report.explain(job, moment, tzname=tzname)
    except ValidationError as exc:
        return " ".join(exc.messages)


def range_from(params, tzname, default_hours=24):
    """(start, end, errors) from the from/to fields of a form, in the job's timezone."""
    errors = []
    now = timezone.now()
    end = local_moment(params.get("to", ""), tzname) if params.get("to") else now
    start = local_moment(params.get("from", ""), tzname) if params.get("from") else end and end - timedelta(
        hours=default_hours)
    if end is None:
        errors.append("To: give a date and time, such as 2026-11-21T03:00.")
    if start is None:
        errors.append("From: give a date and time, such as 2026-11-21T03:00.")
    return start, end, errors


@login_required
def job_slots(request, pk):
    job = get_object_or_404(visible_jobs(request.user).select_related("crontab", "interval", "clocked"), pk=pk)
    tzname = job_timezone(job)
    start, end, errors = range_from(request.GET, tzname)
    report = None
    if not errors:
        try:
            report = slot_report.build(job, start, end)
        except ValidationError as exc:
            errors += exc.messages
    return page(request, "pages/job_slots.html", {
        "job": job, "tzname": tzname, "report": report, "errors": errors,
        "rows": [(slot, slot_text(slot.at, tzname)) for slot in report.slots] if report else [],
        "from_value": local_text(start, tzname) if start else request.GET.get("from", ""),
        "to_value": local_text(end, tzname) if end else request.GET.get("to", ""),
        "counts": [(o, report.count(o)) for o in ("ran", "skipped", "missing", "due", "upcoming")] if report else [],
    }, "jobs")


@login_required
@refused_is_forbidden
def job_backfill(request, pk):
    """GET: the form. POST without ``confirm``: the dry run, listing the slots. POST with it: create."""
    job = get_object_or_404(visible_jobs(request.user), pk=pk)
    tzname = job_timezone(job)
    given = params_form.submitted(request.POST)
    context = {"job": job, "tzname": tzname, "errors": [], "found": None,
               "from_value": request.POST.get("from", ""), "to_value": request.POST.get("to", ""),
               "inputs": params_form.inputs(job, given if request.method == "POST" else None),
               "given": sorted(given.items())}
    if request.method == "POST":
        start, end, errors = range_from(request.POST, tzname)
        if not request.POST.get("from") or not request.POST.get("to"):
            errors = ["Give both ends of the range."]
        context["errors"] = errors
        if not errors:
            confirm = bool(request.POST.get("confirm"))
            try:
                found = actions.backfill(actor(request), job, start, end, dry_run=not confirm, params=given)
            except actions.ActionError as exc:
                if exc.kind != actions.ActionError.INVALID:
                    raise
                mine, context["errors"] = params_form.split_errors(exc.fields)
                context["inputs"] = params_form.inputs(job, given, mine)
            else:
                if confirm:
                    messages.success(request, f"Backfill of {job.name}: {counted(len(found.created), 'run')} queued, "
                                              f"{counted(len(found.existing), 'slot')} already had a run.")
                    return redirect("pages:job", pk=job.pk)
                context["found"] = found
                context["slots"] = [(slot_text(slot, tzname), found.existing.get(slot)) for slot in found.slots]
    return page(request, "pages/job_backfill.html", context, "jobs")
