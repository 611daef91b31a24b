"""The figures the pages show, kept from the ends of runs instead of counted from the runs table:
how many runs ended in each hour and how (per job, and for every job), and each job's recent
durations.

Every end writes one ``RunEnd`` row in the transaction that ends the run (``moves.transition``,
the PostgreSQL success statement, a run born skipped). The scheduler leader folds them here, a
bounded number per tick, into ``JobHourCounts``, ``HourCounts`` and ``RecentRuns``. A batch is taken
out of ``RunEnd`` and added to the figures in one transaction, so each end is counted once, and
batches are folded one at a time (a transaction lock on PostgreSQL; SQLite has a single writer):
the figures are exact, as of the last fold (a tick ago, while a leader runs).
"""

import json
import time
from collections import defaultdict
from datetime import UTC

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..choices import ENDED_STATUSES, TIMED_END_STATUSES
from ..models import (
    EndCounts,
    HourCounts,
    Job,
    JobDayFigures,
    JobHourCounts,
    JobRun,
    RecentRuns,
    RunEnd,
)
from . import arrays, days

FOLD_LOCK = 0x6A6F6273  # pg_advisory_xact_lock key of the fold ("jobs")
PASS_SECONDS = 0.25
TIMED = [str(s) for s in TIMED_END_STATUSES]
ENDED_COUNTERS = [c for c in EndCounts.COUNTERS if c in ENDED_STATUSES]


def hour_of(moment):
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def fold(batch=None, seconds=PASS_SECONDS):
    """Fold waiting ends into the figures, batch after batch of ``batch`` (JOBS_ROLLUP_BATCH) ends,
    until none is left or ``seconds`` have passed (the leader's tick must go on); returns how many
    were folded."""
    batch = batch or settings.JOBS_ROLLUP_BATCH
    folded, until = 0, time.monotonic() + seconds
    while True:
        taken = fold_batch(batch)
        folded += taken
        if taken < batch or time.monotonic() >= until:
            return folded


def fold_batch(batch):
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [FOLD_LOCK])
        ends = _take(batch)
        if ends:
            live = set(Job.objects.filter(pk__in={end[1] for end in ends}).values_list("pk", flat=True))
            _add_counts(ends, live)
            _add_recent(ends, live)
            days.add_days(ends, live)
    return len(ends)


def _take(batch):
    """Delete up to ``batch`` ends, in the order they lie in the table (it has no index to order
    them by), returning (run id, job id, status, ended at, seconds) of each."""
    table = RunEnd._meta.db_table
    where = ("ctid = ANY(ARRAY(SELECT ctid FROM {t} LIMIT %s))" if connection.vendor == "postgresql"
             else "rowid IN (SELECT rowid FROM {t} LIMIT %s)").format(t=table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {where} RETURNING run_id, job_id, status, ended_at, seconds",
                       [batch])
        return [(run_id, job_id, status, _moment(ended_at), seconds)
                for run_id, job_id, status, ended_at, seconds in cursor.fetchall()]


def _moment(value):
    if isinstance(value, str):  # SQLite keeps times as text, in UTC
        value = parse_datetime(value)
    return value if timezone.is_aware(value) else timezone.make_aware(value, UTC)


def _add_counts(ends, live):
    per_job, per_hour = defaultdict(lambda: defaultdict(float)), defaultdict(lambda: defaultdict(float))
    for _run_id, job_id, status, ended_at, seconds in ends:
        hour = hour_of(ended_at)
        rows = [per_hour[hour]] + ([per_job[(job_id, hour)]] if job_id in live else [])
        for row in rows:
            row[status] += 1
            if seconds is not None:
                row["timed"] += 1
                row["seconds"] += seconds
    _upsert(JobHourCounts, ("job_id", "hour"), per_job)
    _upsert(HourCounts, ("hour",), {(hour,): row for hour, row in per_hour.items()})


def _upsert(model, keys, rows):
    """Add ``rows`` ({(key..., hour): {counter: n}}) to the counts of ``model``, one row a key."""
    if not rows:
        return
    table, counters = model._meta.db_table, EndCounts.COUNTERS
    params = []
    for key, row in sorted(rows.items()):
        *ids, hour = key
        values = [row.get(c, 0) for c in counters]
        # The seconds a float in every row: an hour of untimed ends only has a whole 0, and one array
        # of PostgreSQL's takes one type.
        params.append([*ids, hour, *[int(v) for v in values[:-1]], float(values[-1])])
    conflict = (f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
                + ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counters))
    columns = ", ".join((*keys, *counters))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The whole batch as one array per column: one statement, not one per row.
            types = ["bigint"] * (len(keys) - 1) + ["timestamptz"] + ["integer"] * (len(counters) - 1) + ["float8"]
            casts = ", ".join(f"%s::{kind}[]" for kind in types)
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({casts}) {conflict}",
                           [arrays.literal(column) for column in zip(*params, strict=True)])
        else:
            marks = ", ".join(["%s"] * (len(keys) + len(counters)))
            hour_at = len(keys) - 1
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks}) {conflict}",
                               [[*p[:hour_at], connection.ops.adapt_datetimefield_value(p[hour_at]), *p[hour_at + 1:]]
                                for p in params])


def _add_recent(ends, live):
    new = defaultdict(list)
    for run_id, job_id, status, ended_at, seconds in ends:
        if seconds is not None and job_id in live:
            new[job_id].append([run_id, ended_at.timestamp(), seconds, status])
    if not new:
        return
    kept = dict(RecentRuns.objects.filter(job_id__in=list(new)).values_list("job_id", "points"))
    field = RecentRuns._meta.get_field("points")
    params = []
    for job_id, points in sorted(new.items()):
        merged = sorted(kept.get(job_id, []) + points, key=lambda p: (p[1], p[0]))[-RecentRuns.KEPT:]
        params.append([job_id, merged])
    table, conflict = RecentRuns._meta.db_table, "ON CONFLICT (job_id) DO UPDATE SET points = excluded.points"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"INSERT INTO {table} (job_id, points) SELECT * FROM unnest(%s::bigint[], %s::jsonb[]) "
                           + conflict, [arrays.literal([job_id for job_id, _ in params]),
                                        arrays.literal([json.dumps(points) for _, points in params])])
        else:
            cursor.executemany(f"INSERT INTO {table} (job_id, points) VALUES (%s, %s) " + conflict,
                               [[job_id, field.get_db_prep_value(points, connection)] for job_id, points in params])


def recount():
    """Forget the figures and count them again from the runs there are: for a database whose runs
    were written by hand, like the benchmark's. Runs deleted by retention are no longer counted
    afterwards. Returns how many ends were counted."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [FOLD_LOCK])
        for model in (RunEnd, JobHourCounts, HourCounts, RecentRuns, JobDayFigures):
            cursor.execute(f"DELETE FROM {model._meta.db_table}")
        if connection.vendor == "postgresql":
            return _recount_in_sql(cursor)
        cursor.execute(
            f"INSERT INTO {RunEnd._meta.db_table} (run_id, job_id, status, ended_at, seconds) "
            f"SELECT id, job_id, status, finished_at, CASE WHEN status IN ({_marks(TIMED)}) "
            "THEN (julianday(finished_at) - julianday(started_at)) * 86400.0 END "
            f"FROM {JobRun._meta.db_table} WHERE status IN ({_marks(ENDED_STATUSES)}) AND finished_at IS NOT NULL "
            "ORDER BY finished_at", TIMED + [*ENDED_STATUSES])
    folded = 0
    while taken := fold():
        folded += taken
    return folded


def _recount_in_sql(cursor):
    """What folding every end would make (tests/test_rollup.py holds the two to it), in three
    statements (and the days' one): 10,000,000 runs through the fold would take the benchmark an hour."""
    ended = f"status IN ({_marks(ENDED_STATUSES)}) AND finished_at IS NOT NULL"
    timed = f"status IN ({_marks(TIMED)}) AND started_at IS NOT NULL"
    counters = ", ".join([f"count(*) FILTER (WHERE status = '{status}')" for status in ENDED_COUNTERS]
                         + [f"count(*) FILTER (WHERE {timed})",
                            f"COALESCE(sum(EXTRACT(EPOCH FROM finished_at - started_at)) FILTER (WHERE {timed}), 0)"])
    columns = ", ".join(EndCounts.COUNTERS)
    hour = "date_trunc('hour', finished_at, 'UTC')"
    runs = JobRun._meta.db_table
    cursor.execute(f"INSERT INTO {JobHourCounts._meta.db_table} (job_id, hour, {columns}) "
                   f"SELECT job_id, {hour}, {counters} FROM {runs} WHERE {ended} GROUP BY 1, 2",
                   TIMED + TIMED + [*ENDED_STATUSES])
    cursor.execute(f"INSERT INTO {HourCounts._meta.db_table} (hour, {columns}) "
                   f"SELECT {hour}, {counters} FROM {runs} WHERE {ended} GROUP BY 1",
                   TIMED + TIMED + [*ENDED_STATUSES])
    cursor.execute(
        f"INSERT INTO {RecentRuns._meta.db_table} (job_id, points) "
        "SELECT job_id, jsonb_agg(jsonb_build_array(id, EXTRACT(EPOCH FROM finished_at)::float8, "
        "EXTRACT(EPOCH FROM finished_at - started_at)::float8, status) ORDER BY finished_at, id) "
        "FROM (SELECT *, row_number() OVER (PARTITION BY job_id ORDER BY finished_at DESC, id DESC) AS n "
        f"      FROM {runs} WHERE {timed} AND finished_at IS NOT NULL) AS r "
        "WHERE n <= %s GROUP BY job_id", TIMED + [RecentRuns.KEPT])
    days.recount_in_sql(cursor, "r.status IN ({}) AND r.finished_at IS NOT NULL".format(
        ", ".join(repr(str(status)) for status in ENDED_STATUSES)))
    cursor.execute(f"SELECT COALESCE(sum({' + '.join(ENDED_COUNTERS)}), 0) FROM {HourCounts._meta.db_table}")
    return cursor.fetchone()[0]


def _marks(values):
    return ", ".join(["%s"] * len(values))
