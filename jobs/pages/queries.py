"""What the pages show, read with a fixed number of queries whatever the number of jobs or runs."""

import math
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import DurationField, ExpressionWrapper, F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..coordination import leases
from ..execution import publishing
from ..models import ACTIVE_STATUSES, Job, JobAttempt, JobRun, RunStatus
from ..worker import watchdog
from . import figures, keyset

FAILED_STATUSES = [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST]
# What the overview's tables show of a run (the rest, output above all, stays in the database).
SHOWN_RUN_FIELDS = ("job", "status", "created_at", "started_at", "finished_at", "worker")


def queue_depths():
    """[(queue, messages waiting or None when the broker does not answer)] for every queue a job uses."""
    # order_by(): Job's default ordering would make it DISTINCT (queue, name), every job.
    names = set(Job.objects.exclude(queue="").values_list("queue", flat=True).order_by().distinct())
    names.add(settings.JOBS_DEFAULT_QUEUE)
    return sorted(publishing.queue_depth(sorted(names)).items())


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


def latest_failures(user_runs, jobs=None, shown=10):
    """The newest runs that failed, timed out or were lost. For a user who does not see every job,
    each status is taken job by job on its own (keyset.first_ids) and the three merged: a set of
    statuses could not be read from the index in order, and every such run of each job was read
    (bench/pages.py: the owner's overview 35 ms at 1,000,000 runs, 75 ms at 10,000,000)."""
    shown_fields = (*SHOWN_RUN_FIELDS, "error", "job__name")
    if jobs is None or connection.vendor != "postgresql":
        return keyset.first(user_runs.filter(status__in=FAILED_STATUSES).select_related("job").only(*shown_fields),
                            shown, jobs=jobs)
    ids = [pk for status in FAILED_STATUSES for pk in keyset.first_ids(user_runs.filter(status=status), shown, jobs=jobs)]
    return list(JobRun.objects.filter(pk__in=ids).select_related("job").only(*shown_fields)
                .order_by("-created_at", "-id")[:shown]) if ids else []


def sla_overruns(user_runs, now, since, jobs=None, shown=10, looked_at=200):
    """Runs of the last day that ran (or are running) longer than their job's SLA, newest first,
    among the last ``looked_at`` that have an SLA; only the runs shown are loaded."""
    candidates = user_runs.filter(created_at__gte=since, job__sla_seconds__isnull=False, started_at__isnull=False)
    took = ExpressionWrapper(Coalesce("finished_at", Value(now)) - F("started_at"), output_field=DurationField())
    if connection.vendor == "postgresql":  # the database compares (Django multiplies no duration on SQLite)
        sla = ExpressionWrapper(F("job__sla_seconds") * Value(timedelta(seconds=1)), output_field=DurationField())
        over = keyset.first_ids(candidates, looked_at, jobs=jobs)
        found = JobRun.objects.filter(pk__in=over).annotate(ran=took, sla=sla).filter(ran__gt=F("sla"))
    else:
        over = [pk for pk, ran, sla in candidates.annotate(ran=took).order_by("-created_at")
                .values_list("pk", "ran", "job__sla_seconds")[:looked_at] if ran.total_seconds() > sla][:shown]
        found = JobRun.objects.filter(pk__in=over).annotate(ran=took)
    overruns = list(found.select_related("job").only(*SHOWN_RUN_FIELDS, "job__name", "job__sla_seconds")
                    .order_by("-created_at")[:shown])
    for run in overruns:
        run.took = run.ran.total_seconds()
    return overruns


def leader(state):
    """The leading scheduler from the leader lease's ``state`` (leases.state), or None."""
    if not state or state["holder"] is None:
        return None
    return {"node": state["holder"], "since": state["since"], "since_at": state["since"]}  # since_at: the template's


def scheduler_health(now, lease):
    """The watchdog's view (jobs.worker.watchdog.health), with its line for the page."""
    seen = watchdog.health(now, lease)
    seen["text"] = watchdog.outage_text(seen)
    return seen


def recent_workers(now, minutes=10):
    since = now - timedelta(minutes=minutes)
    return sorted(worker for (worker,) in JobAttempt.seen_since(since, "worker"))


def overview(user_runs, user_jobs, now=None, sees_all=False):
    now = now or timezone.now()
    jobs = None if sees_all else user_jobs  # the runs of some jobs only: see keyset.first
    counts, counts_capped = figures.status_counts(user_runs, now - timedelta(hours=24),
                                                  None if sees_all else user_jobs.values("pk"))
    running = list(user_runs.filter(status=RunStatus.RUNNING).select_related("job")
                   .only(*SHOWN_RUN_FIELDS, "job__name", "job__sla_seconds").order_by("started_at")[:50])
    for run in running:
        run.elapsed = (now - run.started_at).total_seconds() if run.started_at else None
        sla = run.job.sla_seconds
        run.over_sla = bool(sla and run.elapsed and run.elapsed > sla)
        run.sla_percent = min(100, int(100 * run.elapsed / sla)) if sla and run.elapsed else None
    # The system box (queues, leader, scheduler, workers) is the operator's: shown to those who see every job.
    system = {"show_system": sees_all}
    if sees_all:
        lags = dispatch_lags(now)
        lease = leases.state(settings.JOBS_LEADER_KEY) or {}  # {}: never taken
        system.update(queues=[(name, depth, *lags.get(name, (None, 0))) for name, depth in queue_depths()],
                      leader=leader(lease), scheduler=scheduler_health(now, lease), workers=recent_workers(now))
    return {
        **system,
        "now": now,
        "counts": counts,
        "counts_capped": counts_capped,
        "active_statuses": [s.value for s in ACTIVE_STATUSES],
        "running": running,
        "failures": latest_failures(user_runs, jobs),
        "upcoming": list(user_jobs.filter(enabled=True, next_run_at__isnull=False).order_by("next_run_at")[:10]),
        "sla_overruns": sla_overruns(user_runs, now, now - timedelta(hours=24), jobs),
    }
