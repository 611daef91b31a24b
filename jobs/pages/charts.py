"""Small SVG charts drawn on the server: a sparkline of recent durations and a duration chart with
the SLA as a line, and timelines of bars on lanes (a workflow run's steps, a worker's pool
processes). No JavaScript and no library: the numbers become coordinates."""

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

STATUS_CLASS = {"succeeded": "ok", "failed": "bad", "timed_out": "bad"}


def human_seconds(seconds):
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def sparkline(points, width=120, height=24):
    """``points``: [(started_at, seconds, status)] oldest first."""
    if not points:
        return mark_safe('<span class="muted">—</span>')
    top = max(p[1] for p in points) or 1
    step = width / max(len(points) - 1, 1)
    coords = [(i * step, height - 2 - (p[1] / top) * (height - 4)) for i, p in enumerate(points)]
    if len(points) == 1:
        coords = [(width / 2, height / 2)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    dots = "".join(
        f'<circle class="{STATUS_CLASS.get(p[2], "")}" cx="{x:.1f}" cy="{y:.1f}" r="2"/>'
        for (x, y), p in zip(coords, points, strict=True)
    )
    label = f"last {len(points)} runs, longest {human_seconds(top)}"
    return mark_safe(
        f'<svg class="spark" viewBox="-3 0 {width + 6} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<polyline points="{line}"/>{dots}</svg>'
    )


def duration_chart(points, sla_seconds=None, width=640, height=200, tzname="UTC"):
    """Durations over time (``points``: [(started_at, seconds, status)] oldest first), with the SLA
    as a dashed line when the job has one; times in ``tzname`` (the job's)."""
    zone = ZoneInfo(tzname)

    def local(moment, form="%Y-%m-%d %H:%M"):
        return moment.astimezone(zone).strftime(f"{form} %Z")

    if not points:
        return mark_safe('<p class="muted">No finished runs yet.</p>')
    left, right, top_pad, bottom = 56, 10, 10, 24
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    top = max([p[1] for p in points] + [sla_seconds or 0]) * 1.1 or 1
    first, last = points[0][0], points[-1][0]
    span = (last - first).total_seconds() or 1

    def x(moment):
        return left + ((moment - first).total_seconds() / span) * plot_w if len(points) > 1 else left + plot_w / 2

    def y(seconds):
        return top_pad + plot_h - (seconds / top) * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="Run durations">',
        f'<line class="axis" x1="{left}" y1="{top_pad + plot_h}" x2="{width - right}" y2="{top_pad + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}"/>',
        f'<text class="tick" x="{left - 4}" y="{top_pad + 8}" text-anchor="end">{escape(human_seconds(top))}</text>',
        f'<text class="tick" x="{left - 4}" y="{top_pad + plot_h}" text-anchor="end">0</text>',
        format_html('<text class="tick" x="{}" y="{}">{}</text>', left, height - 6, local(first)),
        format_html('<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>', width - right, height - 6,
                    local(last)),
    ]
    if len(points) > 1:
        line = " ".join(f"{x(p[0]):.1f},{y(p[1]):.1f}" for p in points)
        parts.append(f'<polyline class="series" points="{line}"/>')
    for started, seconds, status in points:
        utc = "" if tzname == "UTC" else f" ({started.astimezone(UTC):%H:%M:%S} UTC)"
        tip = escape(f"{local(started, '%Y-%m-%d %H:%M:%S')}{utc} · {human_seconds(seconds)} · {status}")
        parts.append(f'<circle class="{STATUS_CLASS.get(status, "")}" cx="{x(started):.1f}" cy="{y(seconds):.1f}" '
                     f'r="3"><title>{tip}</title></circle>')
    if sla_seconds:
        sla_y = y(sla_seconds)
        parts.append(f'<line class="sla" x1="{left}" y1="{sla_y:.1f}" x2="{width - right}" y2="{sla_y:.1f}"/>')
        parts.append(f'<text class="tick sla-label" x="{width - right}" y="{sla_y - 3:.1f}" text-anchor="end">'
                     f'SLA {escape(human_seconds(sla_seconds))}</text>')
    parts.append("</svg>")
    return mark_safe("".join(str(p) for p in parts))


@dataclass(frozen=True)
class Bar:
    """One stretch on a timeline: ``waiting_from`` (queued) to ``start`` drawn pale, ``start`` to
    ``end`` (None: still going) in its status's colour, a link to ``href``."""

    start: datetime
    end: datetime | None
    status: str
    title: str
    href: str = ""
    waiting_from: datetime | None = None


def timeline(lanes, start, end, width=900, lane_height=20, tzname="UTC", label_width=170):
    """Bars on lanes along one time axis (``lanes``: [(label, [Bar])] top to bottom), from ``start``
    to ``end``: a workflow run's steps, a worker's pool processes."""
    if not lanes:
        return mark_safe('<p class="muted">Nothing ran in this window.</p>')
    zone = ZoneInfo(tzname)
    span = (end - start).total_seconds() or 1
    plot_w, axis_h = width - label_width - 10, 22
    height = len(lanes) * lane_height + axis_h

    def x(moment):
        seconds = min(max((moment - start).total_seconds(), 0), span)
        return label_width + seconds / span * plot_w

    def rect(css, left, right, y, title=""):
        tip = f"<title>{escape(title)}</title>" if title else ""
        return (f'<rect class="{css}" x="{left:.1f}" y="{y + 3}" width="{max(right - left, 1.5):.1f}" '
                f'height="{lane_height - 6}">{tip}</rect>')

    parts = [f'<svg class="timeline" viewBox="0 0 {width} {height}" role="img" aria-label="Timeline">']
    for index, (label, bars) in enumerate(lanes):
        y = index * lane_height
        parts.append(format_html('<text class="lane" x="{}" y="{}" text-anchor="end">{}</text>',
                                 label_width - 6, y + lane_height - 6, label))
        for bar in bars:
            finish = bar.end or end
            css = f"bar {STATUS_CLASS.get(bar.status, 'busy' if bar.end is None else '')}".strip()
            drawn = rect("waiting", x(bar.waiting_from), x(bar.start), y) if bar.waiting_from else ""
            drawn += rect(css, x(bar.start), x(finish), y, bar.title)
            parts.append(format_html('<a href="{}">{}</a>', bar.href, mark_safe(drawn)) if bar.href else drawn)
    base = len(lanes) * lane_height
    parts.append(f'<line class="axis" x1="{label_width}" y1="{base}" x2="{width - 10}" y2="{base}"/>')
    for moment, anchor in ((start, "start"), (start + (end - start) / 2, "middle"), (end, "end")):
        parts.append(f'<text class="tick" x="{x(moment):.1f}" y="{base + 15}" text-anchor="{anchor}">'
                     f'{escape(moment.astimezone(zone).strftime("%H:%M:%S %Z"))}</text>')
    parts.append("</svg>")
    return mark_safe("".join(str(p) for p in parts))
