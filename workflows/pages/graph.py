"""A workflow's graph as SVG, drawn on the server: one column per topological depth, each node a
box coloured by its step's status in the selected workflow run, each edge an arrow; and the selected
run's steps along time."""

from datetime import timedelta

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from jobs.pages import charts

from ..definitions import layers

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 170, 44, 70, 26, 12

# Fill and stroke per step status; "none" is a node with no step in the selected run.
COLOURS = {
    "none": ("#f3f4f6", "#9ca3af"),
    "waiting": ("#f3f4f6", "#6b7280"),
    "active": ("#dbe6ff", "#2457d6"),
    "succeeded": ("#dcfce7", "#1a7f37"),
    "failed": ("#fde2e1", "#c62828"),
    "skipped": ("#fef3c7", "#b26a00"),
    "cancelled": ("#e5e7eb", "#374151"),
}


def draw(nodes, edges, steps=None):
    """``nodes``: job names; ``edges``: models.Edge; ``steps``: {job name: WorkflowStep}."""
    steps = steps or {}
    columns = layers(nodes, edges)
    place = {}
    for x, column in enumerate(columns):
        for y, name in enumerate(column):
            place[name] = (PAD + x * (BOX_W + GAP_X), PAD + y * (BOX_H + GAP_Y))
    width = PAD * 2 + max(len(columns), 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max((len(c) for c in columns), default=1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="workflow-graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="workflow graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker></defs>',
    ]
    for edge in edges:
        (x1, y1), (x2, y2) = place[edge.upstream], place[edge.downstream]
        sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2
        mid = (sx + ex) / 2
        dash = ' stroke-dasharray="4 3"' if edge.on_failure == "run" else ""
        parts.append(f'<path class="edge" d="M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}" fill="none" '
                     f'stroke="#6b7280"{dash} marker-end="url(#arrow)"><title>{escape(edge.upstream)} → '
                     f'{escape(edge.downstream)}</title></path>')
    for name in nodes:
        x, y = place[name]
        step = steps.get(name)
        status = step.status if step else "none"
        fill, stroke = COLOURS.get(status, COLOURS["none"])
        label = escape(name if len(name) <= 22 else name[:21] + "…")
        caption = status if step else ""
        title = escape(f"{name}: {status}" + (f" ({step.reason})" if step and step.reason else ""))
        box = (f'<g class="node step-{status}" data-job="{escape(name)}" data-status="{status}">'
               f'<title>{title}</title>'
               f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" stroke="{stroke}" '
               f'stroke-width="1.5"/>'
               f'<text x="{x + 10}" y="{y + 18}" font-size="13" fill="#1d2330">{label}</text>'
               f'<text x="{x + 10}" y="{y + 35}" font-size="11" fill="{stroke}">{caption}</text></g>')
        if step and step.run_id:
            box = f'<a href="{reverse("pages:run", args=[step.run_id])}">{box}</a>'
        parts.append(box)
    parts.append("</svg>")
    return mark_safe("".join(parts))


def steps_timeline(wf_run, steps, now):
    """A Gantt chart of ``wf_run``'s steps (``steps``, with their runs): one lane per step, its run's
    wait for a worker pale, its run in its status's colour, in UTC."""
    started = [step.run for step in steps if step.run and step.run.started_at]
    lanes = []
    for step in sorted(steps, key=lambda s: (s.run.started_at or now) if s.run else now):
        bars = []
        if step.run and step.run.started_at:
            run = step.run
            took = f", {charts.human_seconds((run.finished_at - run.started_at).total_seconds())}" if run.finished_at else ""
            bars.append(charts.Bar(
                start=run.started_at, end=run.finished_at, status=run.status, waiting_from=run.queued_at,
                title=f"{step.job.name}: run #{run.pk} {run.status}{took}", href=reverse("pages:run", args=[run.pk])))
        lanes.append((step.job.name, bars))
    if not started:
        return charts.timeline([], now, now)
    first = min([run.queued_at or run.started_at for run in started] + [wf_run.created_at])
    last = wf_run.finished_at or max([run.finished_at or now for run in started])
    return charts.timeline(lanes, first, max(last, first + timedelta(seconds=1)))
