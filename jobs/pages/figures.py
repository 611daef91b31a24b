"""The figures of the pages, read from what the lifecycle keeps up to date (jobs.lifecycle.rollup)
rather than counted from the runs table: each read is bounded by what the page shows (its jobs,
its hours), never by how much history there is."""

from datetime import UTC, datetime, timedelta

from django.db.models import Sum

from ..choices import ACTIVE_STATUSES, ENDED_STATUSES, RunStatus
from ..lifecycle.rollup import hour_of
from ..models import HourCounts, JobHourCounts, RecentRuns

SUCCESS_WINDOW = timedelta(days=7)
ACTIVE_CAP = 10_000  # the overview counts at most this many active runs, then says "10,000+"


def ended_counts(since, job_ids=None):
    """{status: runs that ended from the hour of ``since`` on}, of the jobs of ``job_ids`` (a list
    or a queryset of ids), or of every job when it is None."""
    hours = HourCounts.objects.all() if job_ids is None else JobHourCounts.objects.filter(job_id__in=job_ids)
    totals = hours.filter(hour__gte=hour_of(since)).aggregate(**{status: Sum(status) for status in ENDED_STATUSES})
    return {status: totals[status] or 0 for status in ENDED_STATUSES}


def active_counts(user_runs, cap=None):
    """({status: runs in it now} for the statuses a run passes through, whether the cap was hit):
    through run_active_idx, at most ``cap`` (ACTIVE_CAP) runs read."""
    cap = cap or ACTIVE_CAP
    statuses = [s for s in RunStatus.values if s in ACTIVE_STATUSES]
    found = list(user_runs.filter(status__in=statuses).values_list("status", flat=True).order_by()[:cap + 1])
    counts = {status: found[:cap].count(status) for status in statuses}
    return counts, len(found) > cap


def status_counts(user_runs, since, job_ids=None, cap=None):
    """([(status, count)] in the order of RunStatus, whether the active ones were capped): the runs
    active now and those that ended since ``since`` (by the hour)."""
    counts, capped = active_counts(user_runs, cap)
    counts.update(ended_counts(since, job_ids))
    return [(status, counts[status]) for status in RunStatus.values], capped


def success_rates(job_ids, now):
    """{job id: (succeeded, finished)} of the runs that finished (succeeded, failed or timed out)
    in the last seven days, by the hour."""
    rows = (JobHourCounts.objects.filter(job_id__in=job_ids, hour__gte=hour_of(now - SUCCESS_WINDOW))
            .values("job_id").annotate(ok=Sum("succeeded"), bad=Sum("failed") + Sum("timed_out")).order_by())
    return {row["job_id"]: (row["ok"], row["ok"] + row["bad"]) for row in rows}


def recent_durations(job_ids, per_job):
    """{job id: [(started_at, seconds, status), ...] oldest first}: the last ``per_job`` runs of each
    job that ended with a duration (RecentRuns)."""
    found = {}
    for job_id, points in RecentRuns.objects.filter(job_id__in=job_ids).values_list("job_id", "points"):
        found[job_id] = [(datetime.fromtimestamp(ended - seconds, tz=UTC), seconds, status)
                         for _run_id, ended, seconds, status in points[-per_job:]]
    return found


def rate_text(succeeded, finished):
    if not finished:
        return "—"
    return f"{100 * succeeded / finished:.0f}%"
