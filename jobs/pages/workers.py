"""A timeline of the workers' runs: one lane per pool process (worker and PID), a bar per attempt it
held, over the last hours. A user sees the attempts of the runs they may see, and nothing else."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ..actions.permissions import sees_everything, visible_runs
from ..models import AttemptOutcome, JobAttempt
from . import charts
from .common import page

HOURS = (1, 3, 6, 24)
MOST_ATTEMPTS = 2000


@login_required
def worker_timeline(request):
    now = timezone.now()
    hours = int(request.GET["hours"]) if request.GET.get("hours") in {str(h) for h in HOURS} else HOURS[0]
    worker = request.GET.get("worker", "")[:255]
    start = now - timedelta(hours=hours)
    attempts = JobAttempt.objects.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=start), started_at__lte=now,
                                         started_at__gte=start - timedelta(days=1)).exclude(worker="")
    if not sees_everything(request.user):
        attempts = attempts.filter(run__in=visible_runs(request.user).values("pk"))
    workers = sorted({name for (name,) in attempts.order_by().values_list("worker").distinct()})
    if worker:
        attempts = attempts.filter(worker=worker)
    chosen = list(attempts.select_related("run__job").order_by("-started_at")[:MOST_ATTEMPTS])
    lanes = {}
    for attempt in reversed(chosen):
        ended = attempt.finished_at if attempt.outcome != AttemptOutcome.RUNNING else None
        took = f", {charts.human_seconds((ended - attempt.started_at).total_seconds())}" if ended else ", running"
        lanes.setdefault((attempt.worker, attempt.pid or 0), []).append(charts.Bar(
            start=attempt.started_at, end=ended, status=attempt.outcome,
            title=f"{attempt.run.job.name}: run #{attempt.run_id} attempt {attempt.number} {attempt.outcome}{took}",
            href=reverse("pages:run", args=[attempt.run_id])))
    chart = charts.timeline([(f"{name} · pid {pid}", bars) for (name, pid), bars in sorted(lanes.items())],
                            start, now)
    return page(request, "pages/workers.html", {
        "chart": chart, "hours": hours, "choices": HOURS, "worker": worker, "workers": workers,
        "attempts": len(chosen), "capped": len(chosen) == MOST_ATTEMPTS, "lanes": len(lanes),
    }, "workers")
