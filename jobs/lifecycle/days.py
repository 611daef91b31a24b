"""The per-day figures of the on-time reports (``JobDayFigures``: a row a job and day, its counts
by measure), folded from the same run ends as the hourly counts (``rollup.fold``), so a report never
reads the runs.

A run counts on the day of its slot in its job's zone (a cron job's timezone; UTC for the others),
the days a user reads a report in. For a scheduled run: that its slot has a run
(``slots``), how it ended (its status), whether its first attempt started within the job's start
deadline (``on_time``; with no deadline set, within JOBS_MISFIRE_GRACE_SECONDS, the scheduler's own
measure of on time), whether it succeeded within the job's SLA (``within_sla``; with no SLA,
whether it succeeded) and, for a skipped one, why (``skipped:<its reason, numbers made #>``). For
every run that ran (any trigger): its duration, as one count in a histogram of buckets each 2^(1/4)
(19 %) wider than the last (``d:<bucket>``), from which the reports read p50 and p95.
"""

import json
import math
import re
from collections import defaultdict
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection

from ..choices import TIMED_END_STATUSES, RunStatus, RunTrigger
from ..models import Job, JobAttempt, JobDayFigures, JobRun
from . import arrays

FIRST_BUCKET_SECONDS = 0.001  # bucket 0 holds every duration up to a millisecond
BUCKET_GROWTH = 2 ** 0.25
SLOTS, ON_TIME, WITHIN_SLA, SKIPPED, DURATION = "slots", "on_time", "within_sla", "skipped:", "d:"
WHY_LENGTH = 90
NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


def bucket_of(seconds):
    if seconds <= FIRST_BUCKET_SECONDS:
        return 0
    return math.floor(math.log(seconds / FIRST_BUCKET_SECONDS) / math.log(BUCKET_GROWTH)) + 1


def bucket_seconds(bucket):
    """The duration a bucket stands for: the middle (geometric) of its bounds."""
    if bucket == 0:
        return FIRST_BUCKET_SECONDS
    return FIRST_BUCKET_SECONDS * BUCKET_GROWTH ** (bucket - 0.5)


def skip_reason(reason):
    """A skip's reason as the reports group it: its words, each number made "#" ("missed: not
    started within # s of its slot (# s late)")."""
    return (NUMBER.sub("#", reason).strip() or "unknown")[:WHY_LENGTH]


def zone_of(timezone):
    """A job's zone for its days: its cron schedule's timezone (a name or a ZoneInfo), else UTC."""
    if timezone is None:
        return UTC
    return timezone if isinstance(timezone, tzinfo) else ZoneInfo(str(timezone))


def deadline_seconds(start_deadline_seconds):
    return start_deadline_seconds or settings.JOBS_MISFIRE_GRACE_SECONDS


def measures(trigger, status, slot, first_start, seconds, reason, job):
    """The measures one ended run adds to its slot's day; ``job``: (start deadline, SLA)."""
    found = []
    if trigger == RunTrigger.SCHEDULE:
        start_deadline, sla = job
        found += [SLOTS, status]
        if first_start is not None and (first_start - slot).total_seconds() <= deadline_seconds(start_deadline):
            found.append(ON_TIME)
        if status == RunStatus.SUCCEEDED and (sla is None or seconds is None or seconds <= sla):
            found.append(WITHIN_SLA)
        if status == RunStatus.SKIPPED:
            found.append(SKIPPED + skip_reason(reason))
    if seconds is not None:
        found.append(f"{DURATION}{bucket_of(seconds)}")
    return found


def add_days(ends, live):
    """Add the ends (run id, job id, status, ended at, seconds) of live jobs to the day counts."""
    seconds_of = {run_id: seconds for run_id, job_id, _status, _at, seconds in ends if job_id in live}
    if not seconds_of:
        return
    if connection.vendor == "postgresql":
        _add_in_sql(list(seconds_of.items()))
    else:
        add_days_in_python(seconds_of)


def add_days_in_python(seconds_of):
    """``add_days`` read into Python, measure by measure (``measures``): SQLite's way, and on
    PostgreSQL the test's measure of the statement. ``seconds_of``: {run id: its end's seconds}."""
    runs = list(JobRun.objects.filter(pk__in=list(seconds_of)).values_list(
        "id", "job_id", "trigger", "status", "scheduled_for", "reason"))
    first_starts = dict(JobAttempt.objects.filter(run_id__in=list(seconds_of), number=1)
                        .values_list("run_id", "started_at"))
    jobs, zones = {}, {}
    for pk, deadline, sla, zone in Job.objects.filter(pk__in={run[1] for run in runs}).values_list(
            "pk", "start_deadline_seconds", "sla_seconds", "crontab__timezone"):
        jobs[pk], zones[pk] = (deadline, sla), zone_of(zone)
    counts = defaultdict(int)
    for run_id, job_id, trigger, status, slot, reason in runs:
        day = slot.astimezone(zones[job_id]).date()
        for measure in measures(trigger, status, slot, first_starts.get(run_id), seconds_of[run_id], reason,
                                jobs[job_id]):
            counts[(job_id, day, measure)] += 1
    _upsert(counts)


# A day that has a row already: its counts and the new ones added measure by measure (the target
# table's alias: f).
_ADD_TO_THE_DAY = ("ON CONFLICT (job_id, day) DO UPDATE SET counts = (SELECT jsonb_object_agg(key, total) FROM ("
                   "SELECT key, sum(value::bigint) AS total FROM (SELECT * FROM jsonb_each_text(f.counts) "
                   "UNION ALL SELECT * FROM jsonb_each_text(excluded.counts)) AS each_count GROUP BY key) AS summed)")


def _upsert(counts):
    """Add ``counts`` ({(job id, day, measure): n}) to the jobs' days: one row a job and day, its
    counts and the new ones added measure by measure in the statement."""
    if not counts:  # the ends' runs were deleted before the fold
        return
    days = defaultdict(dict)
    for (job_id, day, measure), count in counts.items():
        days[(job_id, day)][measure] = count
    rows = [[job_id, day, json.dumps(measures, sort_keys=True)] for (job_id, day), measures in sorted(days.items())]
    table = JobDayFigures._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} AS f (job_id, day, counts) "
                "SELECT * FROM unnest(%s::bigint[], %s::date[], %s::jsonb[]) "
                + _ADD_TO_THE_DAY, [arrays.literal(column) for column in zip(*rows, strict=True)])
        else:
            cursor.executemany(
                f"INSERT INTO {table} (job_id, day, counts) VALUES (%s, %s, %s) "
                "ON CONFLICT (job_id, day) DO UPDATE SET counts = (SELECT json_group_object(key, total) FROM ("
                f"  SELECT key, sum(value) AS total FROM (SELECT key, value FROM json_each({table}.counts) "
                "  UNION ALL SELECT key, value FROM json_each(excluded.counts)) GROUP BY key))",
                [[job_id, connection.ops.adapt_datefield_value(day), measures] for job_id, day, measures in rows])


def read_days(job_ids, first, last):
    """{day: {measure: count}} over the days [first, last], the jobs' counts added together (on
    PostgreSQL in the statement: a tag's report may read 2,000 jobs' 180 days)."""
    found = defaultdict(lambda: defaultdict(int))
    job_ids = list(job_ids)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT f.day, c.key, sum(c.value::bigint) FROM {JobDayFigures._meta.db_table} AS f "
                "CROSS JOIN LATERAL jsonb_each_text(f.counts) AS c "
                "WHERE f.job_id = ANY(%s::bigint[]) AND f.day BETWEEN %s AND %s GROUP BY 1, 2",
                [arrays.literal(job_ids), first, last])
            for day, measure, total in cursor.fetchall():
                found[day][measure] = int(total)
    else:
        for day, counts in JobDayFigures.objects.filter(job_id__in=job_ids, day__gte=first, day__lte=last).values_list(
                "day", "counts"):
            for measure, count in counts.items():
                found[day][measure] += count
    return {day: dict(measures) for day, measures in found.items()}


def recount_in_sql(cursor, ended):
    """What folding every end (``ended``: the runs' condition, with no parameters) would add, in one
    statement (tests/test_reports.py holds the two to each other)."""
    timed = f"r.status IN ({', '.join(repr(str(s)) for s in TIMED_END_STATUSES)}) AND r.started_at IS NOT NULL"
    cursor.execute(_add_sql(f"{JobRun._meta.db_table} AS r",
                            f"CASE WHEN {timed} THEN EXTRACT(EPOCH FROM r.finished_at - r.started_at)::float8 END",
                            ended), [settings.JOBS_MISFIRE_GRACE_SECONDS])


def _add_in_sql(ends):
    """``add_days`` on PostgreSQL: the ends' runs read, their measures made and added to the days in
    one statement, where reading them into Python cost the leader 0.12 ms of CPU a run."""
    with connection.cursor() as cursor:
        cursor.execute(_add_sql(f"unnest(%s::bigint[], %s::float8[]) AS e(run_id, seconds) "
                                f"JOIN {JobRun._meta.db_table} AS r ON r.id = e.run_id", "e.seconds", "true"),
                       [arrays.literal([run_id for run_id, _ in ends]), arrays.literal([seconds for _, seconds in ends]),
                        settings.JOBS_MISFIRE_GRACE_SECONDS])


def _add_sql(runs, seconds, condition):
    """The statement that adds to the days the measures (as ``measures`` makes them) of the runs
    ``r`` of ``runs`` that meet ``condition``; ``seconds``: each run's duration, NULL for one not
    timed. One parameter: JOBS_MISFIRE_GRACE_SECONDS (after those of ``runs``)."""
    jobs, attempts = Job._meta.db_table, JobAttempt._meta.db_table
    crontabs = Job._meta.get_field("crontab").related_model._meta.db_table
    scheduled = f"r.trigger = '{RunTrigger.SCHEDULE.value}'"
    bucket = (f"CASE WHEN {seconds} <= {FIRST_BUCKET_SECONDS} THEN 0 ELSE floor(ln({seconds} / "
              f"{FIRST_BUCKET_SECONDS}) / ln({BUCKET_GROWTH}))::int + 1 END")
    why = (f"left(COALESCE(NULLIF(trim(regexp_replace(r.reason, '{NUMBER.pattern}', '#', 'g')), ''), 'unknown'), "
           f"{WHY_LENGTH})")
    return f"""
        INSERT INTO {JobDayFigures._meta.db_table} AS f (job_id, day, counts)
        SELECT job_id, day, jsonb_object_agg(measure, n) FROM (SELECT job_id, day, measure, count(*) AS n FROM (
            SELECT r.job_id, (r.scheduled_for AT TIME ZONE COALESCE(c.timezone, 'UTC'))::date AS day, m.measure
            FROM {runs} JOIN {jobs} AS j ON j.id = r.job_id
            LEFT JOIN {crontabs} AS c ON c.id = j.crontab_id
            LEFT JOIN {attempts} AS a ON a.run_id = r.id AND a.number = 1
            CROSS JOIN LATERAL (VALUES
                (CASE WHEN {scheduled} THEN '{SLOTS}' END),
                (CASE WHEN {scheduled} THEN r.status END),
                (CASE WHEN {scheduled} AND EXTRACT(EPOCH FROM a.started_at - r.scheduled_for)
                      <= COALESCE(NULLIF(j.start_deadline_seconds, 0), %s) THEN '{ON_TIME}' END),
                (CASE WHEN {scheduled} AND r.status = '{RunStatus.SUCCEEDED.value}' AND (j.sla_seconds IS NULL
                      OR {seconds} IS NULL OR {seconds} <= j.sla_seconds) THEN '{WITHIN_SLA}' END),
                (CASE WHEN {scheduled} AND r.status = '{RunStatus.SKIPPED.value}' THEN '{SKIPPED}' || {why} END),
                (CASE WHEN {seconds} IS NOT NULL THEN '{DURATION}' || ({bucket})::text END)
            ) AS m(measure)
            WHERE {condition} AND m.measure IS NOT NULL
        ) AS each_measure GROUP BY 1, 2, 3) AS per_measure GROUP BY 1, 2
        {_ADD_TO_THE_DAY}"""
