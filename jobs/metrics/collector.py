"""Prometheus metrics computed at scrape time from PostgreSQL and the broker (on SQLite, the quick
start's database, those that need only portable SQL).

The service runs as many processes (web workers, Celery workers and their children, beat), so no
process keeps counters of its own: every scrape asks the system of record. Each query is one
aggregate (GROUP BY, ``COUNT(*) FILTER``) over an index or a bounded window:

- histograms cover runs of the last ``WINDOW`` (one hour); to stay on the ``(status, created_at)``
  index they only look at runs created within ``WINDOW + JOBS_MAX_TIMEOUT_SECONDS``, so a run
  that lived longer than that (a long chain of retries) is left out of them;
- labels by job are capped to the jobs with a run created in that same lookback or an active run:
  a thousand idle jobs add no series;
- the ``*_total`` counters count rows, so they are only as old as the rows: a retention job that
  deletes runs makes them go down, which Prometheus reads as a counter reset;
- a statement timeout bounds the whole scrape's database time.
"""

import ipaddress
import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from ..choices import ACTIVE_PHASES
from ..coordination import leases
from ..execution import publishing
from ..lifecycle import DUPLICATES_DROPPED, ping_queue
from ..models import ACTIVE_STATUSES, TERMINAL_STATUSES, DeliveryCounter, RunStatus

logger = logging.getLogger("jobs.metrics")  # the name operators filter on, from before the module moved

WINDOW = timedelta(hours=1)
STATEMENT_TIMEOUT_MS = 5000
DURATION_BUCKETS = (0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600)
LAG_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
ALL_STATUSES = sorted(RunStatus.values)
TERMINAL = sorted(TERMINAL_STATUSES)
ACTIVE = sorted(ACTIVE_STATUSES)


_more_families = {}


def register(name, families):
    """Another app's metrics: ``families(cursor)`` yields metric families, read in the same
    transaction (and statement timeout) as the jobs' own."""
    _more_families[name] = families


def render():
    """The metrics page: (body, content type)."""
    from prometheus_client import CONTENT_TYPE_LATEST

    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST


def address_allowed(address, allowed):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in allowed:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            logger.warning("METRICS_ALLOWED_IPS: %r is not an address or network", entry)
    return False


class JobsCollector(Collector):
    def collect(self):
        now = timezone.now()
        postgres = connection.vendor == "postgresql"
        with transaction.atomic(), connection.cursor() as cursor:
            if postgres:
                cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            yield from database_metrics(cursor, now, full=postgres)
            yield from scheduler_metrics()
        yield from broker_metrics(queue_names())
        yield from ping_metrics()


def _rows(cursor, sql, params):
    cursor.execute(sql, params)
    return cursor.fetchall()


def _lookback(now):
    return now - WINDOW - timedelta(seconds=settings.JOBS_MAX_TIMEOUT_SECONDS)


def _bucket_columns(expr, buckets):
    return ", ".join(f"COUNT(*) FILTER (WHERE {expr} <= %s)" for _ in buckets)


def _histogram_buckets(counts, buckets, total):
    return [(str(float(le)), count) for le, count in zip(buckets, counts, strict=True)] + [("+Inf", total)]


def database_metrics(cursor, now, full=True):
    """Every family; without ``full`` (SQLite, the quick start's database) those that need only
    portable SQL: the per-job counters and the histograms use PostgreSQL's interval arithmetic."""
    lookback = _lookback(now)
    if full:
        yield from run_counters(cursor, now, lookback)
    yield runs_by_status(cursor)
    if full:
        yield duration_histogram(cursor, now, lookback)
        yield lag_histogram(cursor, now, lookback)
    yield from attempt_counters(cursor)
    yield CounterMetricFamily(
        "jobs_duplicate_deliveries_dropped", "Task deliveries dropped because the run was already claimed or over.",
        value=DeliveryCounter.get(DUPLICATES_DROPPED),
    )
    for families in _more_families.values():
        yield from families(cursor)


def run_counters(cursor, now, lookback):
    finished = CounterMetricFamily(
        "jobs_runs_finished", "Runs in a terminal status, by job (jobs with a recent or active run only).",
        labels=["job", "status"],
    )
    overruns = CounterMetricFamily(
        "jobs_sla_overruns", "Runs that ran (or are running) longer than their job's sla_seconds, by job.",
        labels=["job"],
    )
    rows = _rows(cursor, """
        WITH capped AS (
            SELECT DISTINCT job_id FROM jobs_jobrun WHERE status = ANY(%s) AND created_at >= %s
            UNION SELECT DISTINCT job_id FROM jobs_jobrun WHERE status = ANY(%s) AND phase = ANY(%s)
        )
        SELECT j.name, r.status, COUNT(*),
               COUNT(*) FILTER (WHERE j.sla_seconds IS NOT NULL AND r.started_at IS NOT NULL
                   AND (r.status = 'running' OR r.finished_at IS NOT NULL)
                   AND COALESCE(r.finished_at, %s) - r.started_at > make_interval(secs => j.sla_seconds))
        FROM capped JOIN jobs_jobrun r ON r.job_id = capped.job_id JOIN jobs_job j ON j.id = r.job_id
        GROUP BY j.name, r.status ORDER BY j.name, r.status
    """, [ALL_STATUSES, lookback, ACTIVE, list(ACTIVE_PHASES), now])
    overruns_by_job = {}
    for name, status, count, overrun in rows:
        if status in TERMINAL_STATUSES:
            finished.add_metric([name, status], count)
        overruns_by_job[name] = overruns_by_job.get(name, 0) + overrun
    for name, count in overruns_by_job.items():
        if count:
            overruns.add_metric([name], count)
    yield finished
    yield overruns


def runs_by_status(cursor):
    gauge = GaugeMetricFamily("jobs_runs", "Runs not finished yet, by status (running = running now).",
                              labels=["status"])
    # (phase: what run_active_idx holds, the unfinished runs; models.run says why not the status)
    counts = dict(_rows(cursor, f"SELECT status, COUNT(*) FROM jobs_jobrun WHERE phase IN "
                                f"({', '.join(['%s'] * len(ACTIVE_PHASES))}) GROUP BY status", list(ACTIVE_PHASES)))
    for status in ACTIVE:
        gauge.add_metric([status], counts.get(status, 0))
    return gauge


def duration_histogram(cursor, now, lookback):
    histogram = HistogramMetricFamily(
        "jobs_run_duration_seconds", "started_at to finished_at of runs finished in the last hour, by job.",
        labels=["job"],
    )
    rows = _rows(cursor, f"""
        SELECT j.name, COUNT(*), COALESCE(SUM(d), 0), {_bucket_columns("d", DURATION_BUCKETS)}
        FROM (SELECT job_id, EXTRACT(EPOCH FROM finished_at - started_at)::float AS d FROM jobs_jobrun
              WHERE status = ANY(%s) AND created_at >= %s AND finished_at >= %s AND started_at IS NOT NULL) runs
        JOIN jobs_job j ON j.id = runs.job_id
        GROUP BY j.name ORDER BY j.name
    """, [*DURATION_BUCKETS, TERMINAL, lookback, now - WINDOW])
    for name, total, total_sum, *counts in rows:
        histogram.add_metric([name], _histogram_buckets(counts, DURATION_BUCKETS, total), total_sum)
    return histogram


def lag_histogram(cursor, now, lookback):
    """First attempt's start minus the run's slot: how late runs start (dispatch plus queue wait;
    includes a job's jitter). Retries are left out: their delay is the backoff, on purpose."""
    histogram = HistogramMetricFamily(
        "jobs_dispatch_lag_seconds", "Start of a run's first attempt minus its scheduled_for, for first "
        "attempts started in the last hour.",
    )
    total, total_sum, *counts = _rows(cursor, f"""
        SELECT COUNT(*), COALESCE(SUM(d), 0), {_bucket_columns("d", LAG_BUCKETS)}
        FROM (SELECT GREATEST(0, EXTRACT(EPOCH FROM a.started_at - r.scheduled_for)::float) AS d
              FROM jobs_jobrun r JOIN jobs_jobattempt a ON a.run_id = r.id AND a.number = 1
              WHERE r.status = ANY(%s) AND r.created_at >= %s AND a.started_at >= %s) lags
    """, [*LAG_BUCKETS, ALL_STATUSES, lookback, now - WINDOW])[0]
    histogram.add_metric([], _histogram_buckets(counts, LAG_BUCKETS, total), total_sum)
    return histogram


def attempt_counters(cursor):
    # One pass over the attempts; they are only as many as retention keeps.
    retries, lost = _rows(cursor, """
        SELECT COUNT(*) FILTER (WHERE number > 1), COUNT(*) FILTER (WHERE outcome = 'lost') FROM jobs_jobattempt
    """, [])[0]
    yield CounterMetricFamily("jobs_retries", "Attempts after a run's first one.", value=retries)
    yield CounterMetricFamily("jobs_lost_attempts", "Attempts whose worker stopped heartbeating.", value=lost)


def queue_names():
    from ..models import Job

    names = set(Job.objects.exclude(queue="").order_by().values_list("queue", flat=True).distinct())
    return sorted(names | {settings.JOBS_DEFAULT_QUEUE})


def scheduler_metrics():
    """The leader and its last housekeeping pass, from the leader lease (jobs/coordination/leases.py)."""
    lease = leases.state(settings.JOBS_LEADER_KEY) or {}
    leader_gauge = GaugeMetricFamily("jobs_scheduler_leader", "1 for the scheduler node holding the leader lease.",
                                     labels=["node"])
    if lease.get("holder"):
        leader_gauge.add_metric([lease["holder"]], 1)
    yield leader_gauge
    # Every taking of the lease raises its epoch (a new leader, or one taking it back after losing it).
    yield CounterMetricFamily("jobs_scheduler_leader_changes", "Times the scheduler leader lease was taken.",
                              value=lease.get("epoch") or 0)
    ticked = lease.get("last_tick_at")
    if ticked is not None:
        yield GaugeMetricFamily("jobs_scheduler_last_tick_timestamp_seconds",
                                "When the scheduler leader last finished a housekeeping pass (Unix time).",
                                value=ticked.timestamp())


def ping_metrics():
    """Check-in pings queued and not recorded yet (jobs.lifecycle.ping_queue); none without a queue,
    and left out (with a warning) when its Redis is out of reach."""
    queue = ping_queue.current()
    if queue is None:
        return
    try:
        waiting = queue.waiting()
    except RedisError:
        logger.warning("metrics: the queue of pings did not answer")
        return
    yield GaugeMetricFamily("jobs_pings_waiting", "Check-in pings answered and waiting for the scheduler leader "
                            "to record them.", value=waiting)


def broker_metrics(queues):
    """Queue depth through the broker's transport; left out (with a warning) when the broker is down."""
    depths = publishing.queue_depth(queues)
    if any(depth is None for depth in depths.values()):
        logger.warning("metrics: the broker did not answer; no queue depth")
        return
    depth = GaugeMetricFamily("jobs_queue_depth", "Messages waiting in the broker queue (not yet taken by a "
                              "worker).", labels=["queue"])
    for queue, count in depths.items():
        depth.add_metric([queue], count)
    yield depth
