"""What the pages show, read with a fixed number of queries whatever the number of jobs or runs."""

import math
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone
from redis.exceptions import RedisError

from ..leader import current_leader, redis_client
from ..models import Job, JobAttempt, JobRun, RunStatus

SUCCESS_WINDOW = timedelta(days=7)
SPARKLINE_RUNS = 20
FAILED_STATUSES = [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST]
FINISHED_STATUSES = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT]


def status_counts(runs, since):
    """{status: count} of the runs created since ``since``, every status present (0 when none)."""
    counts = dict(runs.filter(created_at__gte=since).values_list("status").annotate(n=Count("id")).order_by())
    return [(status, counts.get(status, 0)) for status in RunStatus.values]


def success_rates(job_ids, now=None):
    """{job id: (succeeded, finished)} over the last seven days, in one aggregate query."""
    since = (now or timezone.now()) - SUCCESS_WINDOW
    rows = (
        JobRun.objects.filter(job_id__in=job_ids, created_at__gte=since, status__in=FINISHED_STATUSES)
        .values("job_id")
        .annotate(finished=Count("id"), succeeded=Count("id", filter=Q(status=RunStatus.SUCCEEDED)))
        .order_by()
    )
    return {row["job_id"]: (row["succeeded"], row["finished"]) for row in rows}


def recent_durations(job_ids, per_job=SPARKLINE_RUNS):
    """{job id: [(started_at, seconds, status), ...] oldest first}: the last ``per_job`` finished runs
    of each job, in one query."""
    finished = JobRun.objects.filter(status__in=FINISHED_STATUSES, started_at__isnull=False,
                                     finished_at__isnull=False)
    columns = ("job_id", "started_at", "finished_at", "status")
    job_ids = list(job_ids)
    if connection.features.supports_slicing_ordering_in_compound and job_ids:
        # A UNION of one LIMITed branch per job reads ~per_job rows of each through run_job_recent_idx;
        # a window function would number every run of every job (100,000 for a busy one: bench/pages.py).
        branches = [finished.filter(job_id=pk).order_by("-created_at").values_list(*columns)[:per_job]
                    for pk in job_ids]
        rows = branches[0].union(*branches[1:], all=True) if len(branches) > 1 else branches[0]
    else:
        rows = (
            finished.filter(job_id__in=job_ids)
            .annotate(rank=Window(RowNumber(), partition_by=[F("job_id")], order_by=F("started_at").desc()))
            .filter(rank__lte=per_job)
            .values_list(*columns)
        )
    found = {}
    for job_id, started, finished, status in rows:
        found.setdefault(job_id, []).append((started, (finished - started).total_seconds(), status))
    for points in found.values():
        points.sort(key=lambda p: p[0])
    return found


def rate_text(succeeded, finished):
    if not finished:
        return "—"
    return f"{100 * succeeded / finished:.0f}%"


def queue_depths(client):
    """[(queue, messages waiting or None when Redis does not answer)] for every queue a job uses."""
    names = set(Job.objects.exclude(queue="").values_list("queue", flat=True).distinct())
    names.add(settings.JOBS_DEFAULT_QUEUE)
    names = sorted(names)
    try:
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(name)
            lengths = pipe.execute()
    except RedisError:
        lengths = [None] * len(names)
    return list(zip(names, lengths, strict=True))


def dispatch_lags(now, minutes=15, limit=5000):
    """{queue: (p95 seconds from slot to start, runs)} over first attempts started lately."""
    rows = (JobRun.objects.filter(created_at__gte=now - timedelta(minutes=minutes), attempt=1,
                                  started_at__isnull=False)
            .order_by("-created_at").values_list("job__queue", "scheduled_for", "started_at")[:limit])
    lags = {}
    for queue, slot, started in rows:
        lags.setdefault(queue or settings.JOBS_DEFAULT_QUEUE, []).append(max(0.0, (started - slot).total_seconds()))
    # Nearest-rank percentile: with few runs the p95 is the slowest of them.
    return {queue: (sorted(values)[math.ceil(0.95 * len(values)) - 1], len(values)) for queue, values in lags.items()}


def sla_overruns(user_runs, now, since, shown=10):
    """Runs of the last day that ran (or are running) longer than their job's SLA, newest first."""
    candidates = (user_runs.filter(created_at__gte=since, job__sla_seconds__isnull=False, started_at__isnull=False)
                  .select_related("job").order_by("-created_at")[:500])
    overruns = []
    for run in candidates:
        run.took = ((run.finished_at or now) - run.started_at).total_seconds()
        if run.took > run.job.sla_seconds:
            overruns.append(run)
    return overruns[:shown]


def leader(client):
    try:
        found = current_leader(client)
    except (RedisError, ValueError):
        return None
    if found and found.get("since"):
        found["since_at"] = datetime.fromtimestamp(found["since"], tz=UTC)
    return found


def recent_workers(now, minutes=10):
    since = now - timedelta(minutes=minutes)
    return list(
        JobAttempt.objects.filter(Q(started_at__gte=since) | Q(heartbeat_at__gte=since))
        .exclude(worker="").values_list("worker", flat=True).distinct().order_by("worker")
    )


def overview(user_runs, user_jobs, now=None):
    now = now or timezone.now()
    running = list(user_runs.filter(status=RunStatus.RUNNING).select_related("job").order_by("started_at")[:50])
    for run in running:
        run.elapsed = (now - run.started_at).total_seconds() if run.started_at else None
        sla = run.job.sla_seconds
        run.over_sla = bool(sla and run.elapsed and run.elapsed > sla)
        run.sla_percent = min(100, int(100 * run.elapsed / sla)) if sla and run.elapsed else None
    client = redis_client()
    lags = dispatch_lags(now)
    try:
        return {
            "now": now,
            "counts": status_counts(user_runs, now - timedelta(hours=24)),
            "running": running,
            "failures": list(user_runs.filter(status__in=FAILED_STATUSES).select_related("job")
                             .order_by("-created_at")[:10]),
            "upcoming": list(user_jobs.filter(enabled=True, next_run_at__isnull=False).order_by("next_run_at")[:10]),
            "queues": [(name, depth, *lags.get(name, (None, 0))) for name, depth in queue_depths(client)],
            "sla_overruns": sla_overruns(user_runs, now, now - timedelta(hours=24)),
            "leader": leader(client),
            "workers": recent_workers(now),
        }
    finally:
        client.close()
