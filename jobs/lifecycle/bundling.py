"""Which runs published together go in one message (a bundle, jobs.worker.bundle), and which alone.

Runs published in one batch (a slot's dispatch, catch-up, a backfill, the release of waiting runs
or retries, the monitor's publish again) are grouped by queue and priority into bundles of up to
``JOBS_BUNDLE_MAX_RUNS`` when at least two of them are of short jobs: a job whose recent p95
duration (the last ``RecentRuns`` of it, at least ``MIN_HISTORY`` of them) is at most
``JOBS_BUNDLE_SHORT_SECONDS``, or that has no such history yet. A new job is taken for short: most
are, and a wrong guess costs the runs behind it in its bundle at most its share (``split_seconds``),
after which they are split off and go on elsewhere. A job under a limit, or that says never
(``bundle`` = never), goes alone, as does a run published on its own
(run now) and every run while traces are on (each message carries its run's trace). Which jobs are
short is asked once a batch for the jobs not asked in the last ``CACHE_SECONDS``.
"""

import math
import time

from django.conf import settings
from django.db import connection

from ..choices import BundlePolicy
from ..execution import publishing
from ..models import Job, RecentRuns

MIN_HISTORY = 5  # durations of a job before its history says whether it is short (before: short)
CACHE_SECONDS = 60.0
SHARE_OF_SHORT = 2  # a run in a bundle may run this many times JOBS_BUNDLE_SHORT_SECONDS before it is split off
MARGIN_SECONDS = 30  # of a bundle's hard time limit: its claim and the recording of its outcomes

_short = {}  # job id -> (short?, until when, on the monotonic clock)


def split_seconds():
    """How long a run in a bundle may run before the runs behind it go on elsewhere (its share)."""
    return SHARE_OF_SHORT * settings.JOBS_BUNDLE_SHORT_SECONDS


def grouped(messages, job_ids):
    """``messages`` (publishing.Message, with the id of each one's job) as they go to the broker:
    the runs of short jobs in bundles by queue and priority, the others (and a bundle of one) alone."""
    most = settings.JOBS_BUNDLE_MAX_RUNS
    known = {job_id for job_id in job_ids if job_id is not None}
    if most < 2 or len(messages) < 2 or not known:
        return messages
    short = short_jobs(known)
    alone, groups = [], {}
    for message, job_id in zip(messages, job_ids, strict=True):
        if job_id in short and not message.headers:
            groups.setdefault((message.queue, message.priority), []).append(message)
        else:
            alone.append(message)
    for group in groups.values():
        for start in range(0, len(group), most):
            chunk = group[start:start + most]
            alone.append(chunk[0] if len(chunk) == 1 else bundle_of(chunk))
    return alone


def bundle_of(messages):
    """One message for these runs of a queue. Its hard time limit: every run but the last within its
    share (a longer one is split off), the longest hard limit of one, and a margin."""
    hard = (len(messages) - 1) * split_seconds() + max(m.time_limit for m in messages) + MARGIN_SECONDS
    first = messages[0]
    return publishing.Bundle(tuple((m.run_id, m.attempt) for m in messages), first.queue, hard, None, first.priority)


def short_jobs(job_ids):
    """Those of ``job_ids`` short enough to bundle."""
    now = time.monotonic()
    unknown = {job_id for job_id in job_ids if job_id not in _short or _short[job_id][1] < now}
    if unknown:
        found = _short_in_database(sorted(unknown))
        until = now + CACHE_SECONDS
        for job_id in unknown:
            _short[job_id] = (job_id in found, until)
        if len(_short) > 200_000:
            _short.clear()
    return {job_id for job_id in job_ids if _short[job_id][0]}


SHORT_SQL = f"""
SELECT j.id FROM {Job._meta.db_table} AS j LEFT JOIN {RecentRuns._meta.db_table} AS r ON r.job_id = j.id
WHERE j.id = ANY(%(ids)s) AND j.limit_key = '' AND j.bundle <> '{BundlePolicy.NEVER.value}'
  AND CASE WHEN COALESCE(jsonb_array_length(r.points), 0) < %(min)s THEN true
      -- a point is [run id, ended at, seconds, status]
      ELSE (SELECT percentile_disc(0.95) WITHIN GROUP (ORDER BY (p ->> 2)::float8)
            FROM jsonb_array_elements(r.points) AS p) <= %(short)s END
"""


def _short_in_database(job_ids):
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(SHORT_SQL, {"ids": job_ids, "min": MIN_HISTORY, "short": settings.JOBS_BUNDLE_SHORT_SECONDS})
            return {job_id for (job_id,) in cursor.fetchall()}
    candidates = list(Job.objects.filter(pk__in=job_ids, limit_key="").exclude(bundle=BundlePolicy.NEVER)
                      .values_list("pk", flat=True))
    points = dict(RecentRuns.objects.filter(job_id__in=candidates).values_list("job_id", "points"))
    return {job_id for job_id in candidates if _is_short(points.get(job_id) or [])}


def _is_short(points):
    if len(points) < MIN_HISTORY:
        return True
    seconds = sorted(point[2] for point in points)
    return seconds[math.ceil(0.95 * len(seconds)) - 1] <= settings.JOBS_BUNDLE_SHORT_SECONDS


def forget():
    """Ask the database again about every job (a test that changes a job's history)."""
    _short.clear()
