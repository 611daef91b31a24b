"""The forecast page: the runs due per minute over the next hours as a chart, the peak minutes with
their jobs and the worker slots they need, and for staff a form per peak to spread its jobs (the
suggested spread filled in), which calls the one audited action (``jobs.actions.spreading``)."""

import math
from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from ..actions import jobs as actions
from ..actions import spreading
from ..actions.permissions import sees_everything, visible_jobs
from ..operations import forecast as forecasts
from .common import actor, counted, page

CHART_WIDTH, CHART_HEIGHT = 720, 120  # the plot; the axes' labels are drawn around it
LEFT, BOTTOM = 44, 18


def load_chart(per_minute, peaks, start):
    """Bars of the runs due, one per column of minutes (the busiest minute of the column), the peaks
    red, over a scale from 0 with room above the busiest minute, the average as a dashed line, and
    the hours (UTC) along the bottom: a flat load reads as a flat band, not a block."""
    if not per_minute:
        return mark_safe("")
    columns = min(len(per_minute), CHART_WIDTH // 2)
    width = len(per_minute) / columns
    top = max(1, math.ceil(max(per_minute) * 1.25))
    peak_minutes = {p["index"] for p in peaks}

    def y(runs):
        return CHART_HEIGHT - runs / top * CHART_HEIGHT

    bars = []
    for column in range(columns):
        first, last = int(column * width), max(int((column + 1) * width), int(column * width) + 1)
        busiest = max(per_minute[first:last])
        if busiest:
            height = max(1.0, CHART_HEIGHT - y(busiest))
            hot = any(first <= m < last for m in peak_minutes)
            bars.append((f"{LEFT + column * CHART_WIDTH / columns:.1f}", f"{CHART_HEIGHT - height:.1f}",
                         f"{max(CHART_WIDTH / columns - 0.5, 0.5):.1f}", f"{height:.1f}", "peak" if hot else "load",
                         f"{start + timedelta(minutes=first):%H:%M} UTC: {busiest} run{'s' if busiest != 1 else ''}"))
    average = sum(per_minute) / len(per_minute)
    every = max(1, len(per_minute) // 60 // 6) * 60  # about six hour marks
    hours = [(f"{LEFT + minute / len(per_minute) * CHART_WIDTH:.1f}", f"{start + timedelta(minutes=minute):%H:%M}")
             for minute in range(0, len(per_minute), every)]
    return format_html(
        '<svg class="forecast-chart" viewBox="0 0 {} {}" width="100%" role="img" aria-label="Runs due per minute">'
        '<line class="axis" x1="{}" y1="0" x2="{}" y2="{}"/><line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="tick" x="{}" y="10" text-anchor="end">{}/min</text>'
        '<text class="tick" x="{}" y="{}" text-anchor="end">0</text>{}'
        '<line class="average" x1="{}" y1="{}" x2="{}" y2="{}"><title>average: {} runs a minute</title></line>'
        '{}</svg>',
        LEFT + CHART_WIDTH + 4, CHART_HEIGHT + BOTTOM,
        LEFT, LEFT, CHART_HEIGHT, LEFT, CHART_HEIGHT, LEFT + CHART_WIDTH, CHART_HEIGHT,
        LEFT - 4, top, LEFT - 4, CHART_HEIGHT,
        format_html_join("", '<rect x="{}" y="{}" width="{}" height="{}" class="{}"><title>{}</title></rect>', bars),
        LEFT, f"{y(average):.1f}", LEFT + CHART_WIDTH, f"{y(average):.1f}", f"{average:.2f}",
        format_html_join("", '<text class="tick" x="{}" y="' + str(CHART_HEIGHT + 13) + '">{}</text>', hours))


@login_required
def forecast_page(request):
    errors, shown = [], None
    try:
        hours, peaks, listed = forecasts.parameters(request.GET)
    except ValidationError as exc:
        errors = [f"{name}: {' '.join(texts)}" for name, texts in exc.message_dict.items()]
    else:
        now = timezone.now()
        staff = sees_everything(request.user)
        shown = forecasts.forecast(visible_jobs(request.user), now, hours, peaks, listed,
                                   workers_seen=forecasts.worker_slots_seen(now) if staff else None)
        for peak in shown["peaks"]:
            peak["index"] = int((peak["minute"] - shown["start"]).total_seconds() // 60)
    return page(request, "pages/forecast.html", {
        "forecast": shown, "errors": errors, "hours": request.GET.get("hours", "24"),
        "chart": load_chart(shown["per_minute"], shown["peaks"], shown["start"]) if shown else "",
        "may_spread": sees_everything(request.user), "max_spread": spreading.MAX_SPREAD_SECONDS,
    }, "forecast")


@login_required
@require_POST
def forecast_spread(request):
    """Spread the chosen jobs of a peak (``job`` ids), or every job of its minute (``all``)."""
    if not sees_everything(request.user):
        raise PermissionDenied("Only staff may spread jobs from the forecast.")
    try:
        seconds = int(request.POST.get("spread", ""))
    except ValueError:
        seconds = None
    ids = []
    if request.POST.get("all"):
        try:
            minute = datetime.fromisoformat(request.POST.get("minute", ""))
        except ValueError:
            minute = None
        if minute is None or minute.tzinfo is None:
            messages.error(request, "The peak's minute is not a date and time.")
            return redirect("pages:forecast")
        ids = forecasts.jobs_due_in_minute(visible_jobs(request.user), minute, spreading.MAX_JOBS)
    else:
        ids = [int(value) for value in request.POST.getlist("job") if value.isdigit()]
    try:
        changed = spreading.apply_spread(actor(request), ids, seconds)
    except actions.ActionError as exc:
        if exc.kind == actions.ActionError.FORBIDDEN:
            raise PermissionDenied(exc.message) from None
        messages.error(request, " ".join(t for texts in exc.fields.values() for t in texts) or exc.message)
    else:
        messages.success(request, f"Spread {seconds} s set on {counted(changed, 'job')}.")
    return redirect("pages:forecast")
