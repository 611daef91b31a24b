"""The on-time report pages: a job's (with its heat map of days) and a tag's or a group's, each over
7, 30 or 90 days, with the CSV of the API's report one click away; ``/reports/`` with neither a tag
nor a group lists the reports a user may read."""

from datetime import date
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.http import Http404
from django.shortcuts import get_object_or_404

from ..actions.permissions import visible_jobs
from ..api.filters import with_tag
from ..models import ScheduleType
from ..operations import reports
from .common import page


def chosen_days(request):
    try:
        return reports.window_days(request.GET.get("days", 30))
    except ValueError:
        return 30


def heat_map(report):
    """The report's days as weeks (Monday first) of cells, each with its on-time share's shade:
    started on time out of the slots expected (or with a run, when more ran than expected)."""
    cells = []
    for row in report["daily"]:
        slots = max(row["expected"], row["with_run"])
        share = None if not slots else min(row["on_time"], slots) / slots
        shade = "none" if share is None else "good" if share >= 0.99 else "fair" if share >= 0.9 else "poor"
        cells.append({**row, "share": share, "shade": shade, "weekday": date.fromisoformat(row["day"]).weekday()})
    weeks, week = [], [None] * (cells[0]["weekday"] if cells else 0)
    for cell in cells:
        week.append(cell)
        if len(week) == 7:
            weeks.append(week)
            week = []
    if week:
        weeks.append(week + [None] * (7 - len(week)))
    return weeks


def context(report, days):
    return {"report": report, "days": days, "windows": reports.WINDOWS, "weeks": heat_map(report)}


@login_required
def job_report(request, pk):
    job = get_object_or_404(visible_jobs(request.user).select_related("crontab", "interval", "clocked"), pk=pk)
    days = chosen_days(request)
    return page(request, "pages/report.html", {
        **context(reports.job_report(job, days), days), "job": job, "title": job.name,
        "csv": f"/api/jobs/{job.pk}/report/?days={days}&format=csv"}, "jobs")


INDEX_JOBS = 500  # the jobs whose tags and reports the index lists


def report_index(request, jobs, days):
    """The reports a user may read: of each tag and group of their scheduled jobs, and of each job."""
    shown = list(jobs.exclude(schedule_type=ScheduleType.MANUAL).order_by("name")[:INDEX_JOBS])
    tags = sorted({tag for job in shown for tag in job.tags or []})
    groups = sorted({job.group.name for job in shown if job.group_id})
    return page(request, "pages/reports.html", {
        "tags": tags, "groups": groups, "jobs": shown, "days": days, "windows": reports.WINDOWS,
        "capped": len(shown) == INDEX_JOBS}, "reports")


@login_required
def tag_or_group_report(request):
    days = chosen_days(request)
    jobs = visible_jobs(request.user).select_related("crontab", "interval", "clocked", "group")
    tag, group_name = request.GET.get("tag", "")[:100], request.GET.get("group", "")[:150]
    if tag:
        chosen, title, query = with_tag(jobs, tag), f"tag {tag}", {"tag": tag}
    elif group_name:
        group = Group.objects.filter(name=group_name).first()
        if group is None:
            raise Http404("No such group.")
        chosen, title, query = jobs.filter(group=group), f"group {group.name}", {"group": group.name}
    else:
        return report_index(request, jobs, days)
    chosen = list(chosen[:reports.MAX_JOBS])
    try:
        report = reports.jobs_report(chosen, days)
    except reports.ReportTooLarge as exc:
        refused = page(request, "pages/report.html", {"title": title, "refused": str(exc), "days": days,
                                                      "windows": reports.WINDOWS, "query": urlencode(query)}, "reports")
        refused.status_code = 400
        return refused
    return page(request, "pages/report.html", {
        **context(report, days), "title": title, "jobs_in_report": chosen,
        "query": urlencode(query), "csv": f"/api/reports/?{urlencode({**query, 'days': days, 'format': 'csv'})}"},
        "reports")
