"""History partitioned by month (issue 49 point 4): does it pay? Today's tables against a partitioned
copy of the same rows, in one database and one invocation.

Loads --runs runs (default 10,000,000) of --jobs jobs over the twelve months before the current one
and the current one so far, one attempt per run that started, into today's tables (``jobs_jobrun``,
``jobs_jobattempt``, as the project's migrations make them), their indexes and unique and foreign-key
constraints dropped for the load and made again after it (the primary keys stay). Then a copy of the
same rows partitioned by month of ``created_at``, the column retention's cutoff reads
(jobs.operations.retention: ``created_at < cutoff``): ``bench_runs_p`` and ``bench_attempts_p``, the
attempts partitioned by their run's ``created_at`` (a column they need for it, ``run_created_at``),
loaded likewise and indexed after. What a partitioned table cannot keep is kept as near as it can:
the primary key is (id, created_at), ``run_one_per_slot`` becomes unique on (job, slot, created_at)
(which no longer keeps one run per slot), the attempts' foreign key names (run_id, run_created_at).

Measured, today's tables against the copy, interleaved where it can be:

- the pages' queries on the runs: the SQL that /runs/ (first page, and half the history back) and a
  job's page (/jobs/<id>/) send about runs and attempts, captured from the real views over today's
  tables and run again as it is and with the copy's table names, 5 warm-up + --repeat timed each;
- the worker's claim (jobs.lifecycle.postgres.CLAIM_SQL, prepared, one autocommit statement as the
  worker sends it), over --claims runs of the newest month: by id on today's tables; on the copy by
  id alone (every partition's primary key probed) and by id and created_at (one partition): prepared
  (plan_cache_mode auto), with a generic plan forced, and not prepared;
- retention of the oldest month: on today's tables ``jobs.operations.retention.prune`` (the
  project's pass: JOBS_RETENTION_DAYS=30, JOBS_RETENTION_MIN_RUNS=1, ``now`` 30 days after the
  month's end, so its cutoff is the month boundary) against DETACH PARTITION + DROP TABLE of the
  month on the copy; wall time, WAL (the server's LSN, shared with other databases, and the WAL
  records of this database's pages through pg_walinspect, a replication slot keeping the WAL until
  it is read), the CPU of its backend;
- the tables' and indexes' sizes.

    psql -h 127.0.0.1 -U postgres -c "create database bench_partition"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_partition REDIS_URL=redis://127.0.0.1:6379/3 \\
        .venv/bin/python bench/partitioning.py --runs 10000000

Empties the database's tables of jobs and runs (and drops the copy) at the start and at the end
(--keep leaves them).
"""

import contextlib
import os
import re
import statistics
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database
from harness.readings import load_average, pct, with_backend
from harness.table import markdown, ratio, say

REPO = benchenv.setup(JOBS_RETENTION_DAYS="30", JOBS_RETENTION_MIN_RUNS="1")

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.lifecycle import postgres as lifecycle_sql  # noqa: E402
from jobs.models import Job, JobRun  # noqa: E402
from jobs.operations import retention  # noqa: E402
from jobs.pages.keyset import position  # noqa: E402

RUNS, ATTEMPTS = "jobs_jobrun", "jobs_jobattempt"
RUNS_P, ATTEMPTS_P = "bench_runs_p", "bench_attempts_p"
MONTHS_BACK = 12  # full months before the current one
WARMUP = 5

# --- SQL helpers


def run(sql, params=None):
    return database.execute(sql, params)


def rows(sql, params=None):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def one(sql, params=None):
    return rows(sql, params)[0][0]


def month_start(moment, months=0):
    """The first instant (UTC) of ``moment``'s month, ``months`` later."""
    index = moment.year * 12 + moment.month - 1 + months
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def columns(table, generated=False):
    """The table's columns in order, without the generated ones (``phase``) unless ``generated``."""
    return [name for name, gen in rows(
        "SELECT attname, attgenerated FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", [table]) if generated or not gen]


def drop_for_load(table):
    """Drop the table's indexes and its unique and foreign-key constraints but its primary key; the
    statements that make them again, in the same order."""
    constraints = rows("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                       "WHERE conrelid = %s::regclass AND contype IN ('u', 'f') ORDER BY conname", [table])
    indexes = rows("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index i "
                   "WHERE indrelid = %s::regclass AND NOT EXISTS "
                   "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid) "
                   "ORDER BY 1", [table])
    for name, _ in constraints:
        run(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        run(f"DROP INDEX {name}")
    return ([definition for _, definition in indexes]
            + [f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}' for name, definition in constraints])


def timed_steps(label, statements):
    started = time.monotonic()
    for sql in statements:
        run(sql)
    say(f"  {label}: {time.monotonic() - started:.0f} s")


# --- loading today's tables

RUNS_SQL = """
INSERT INTO jobs_jobrun (job_id, status, trigger, scheduled_for, attempt, max_attempts, created_at, queued_at,
    started_at, finished_at, heartbeat_at, next_attempt_at, publish_count, worker, output, output_bytes, result,
    error, reason, triggered_by_id, lost_attempts)
SELECT job_id, status, trigger, slot, 1, 1, slot, slot + interval '50 ms',
    CASE WHEN status IN ('skipped', 'queued') THEN NULL ELSE slot + interval '200 ms' END,
    CASE WHEN status IN ('skipped', 'queued', 'running') THEN NULL
         ELSE slot + interval '200 ms' + make_interval(secs => took) END,
    CASE WHEN status = 'running' THEN now() ELSE NULL END,
    NULL, CASE WHEN status = 'skipped' THEN 0 ELSE 1 END,
    CASE WHEN status = 'skipped' THEN '' ELSE 'celery@bench-' || (g %% 4) END,
    CASE WHEN status = 'succeeded' THEN 'done' ELSE '' END, 4, NULL,
    CASE WHEN status = 'failed' THEN 'RuntimeError: boom'
         WHEN status = 'timed_out' THEN 'Timed out after 3600 s' ELSE '' END,
    CASE WHEN status = 'skipped' THEN 'missed: start deadline passed' ELSE '' END, NULL, 0
FROM (
    SELECT g, %(first)s + g %% %(jobs)s AS job_id,
        CASE WHEN g > %(runs)s - 150 THEN 'running' WHEN g > %(runs)s - 300 THEN 'queued'
             WHEN (g * 104729) %% 1000 < 900 THEN 'succeeded' WHEN (g * 104729) %% 1000 < 950 THEN 'failed'
             WHEN (g * 104729) %% 1000 < 970 THEN 'timed_out' ELSE 'skipped' END AS status,
        CASE WHEN g %% 100 = 0 THEN 'manual' ELSE 'schedule' END AS trigger,
        %(start)s::timestamptz + make_interval(secs => (g - 1) * %(step)s) AS slot,
        1 + (g * 31) %% 120 AS took
    FROM generate_series(1::bigint, %(runs)s) AS g
) AS r
"""

ATTEMPTS_SQL = """
INSERT INTO jobs_jobattempt (run_id, number, outcome, task_id, worker, pid, started_at, finished_at, heartbeat_at,
    error, traceback)
SELECT id, 1, status, 'run-' || id || '-1', worker, 4242, started_at, finished_at, heartbeat_at, error, ''
FROM jobs_jobrun WHERE started_at IS NOT NULL
"""

LAST_RUN_SQL = """
UPDATE jobs_job AS j SET last_run_id = (
    SELECT r.id FROM jobs_jobrun r WHERE r.job_id = j.id ORDER BY r.created_at DESC, r.id DESC LIMIT 1)
"""


def load_plain(runs, jobs, start, end):
    """Today's tables: [statements that made their indexes and constraints again]."""
    drop_copy()
    database.empty()
    Job.objects.bulk_create([Job(name=f"part-{i:05d}", kind="callable", target="jobs.builtin.noop")
                             for i in range(jobs)], batch_size=5000)
    first = Job.objects.order_by("pk").values_list("pk", flat=True).first()
    remade = drop_for_load(ATTEMPTS) + drop_for_load(RUNS)
    started = time.monotonic()
    count = run(RUNS_SQL, {"first": first, "jobs": jobs, "runs": runs, "start": start,
                           "step": (end - start).total_seconds() / runs})
    say(f"  today's runs: {count:,} in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    count = run(ATTEMPTS_SQL)
    say(f"  today's attempts: {count:,} in {time.monotonic() - started:.0f} s")
    # The runs' first (the attempts' foreign key names their primary key, kept throughout).
    timed_steps("today's indexes and constraints", remade)
    run(LAST_RUN_SQL)
    started = time.monotonic()
    run(f"VACUUM ANALYZE {RUNS}")
    run(f"VACUUM ANALYZE {ATTEMPTS}")
    run("ANALYZE jobs_job")
    say(f"  today's tables vacuumed and analyzed in {time.monotonic() - started:.0f} s")
    return remade


# --- the partitioned copy


def drop_copy():
    run(f"DROP TABLE IF EXISTS {ATTEMPTS_P}, {RUNS_P}")


def partition_name(table, month):
    return f"{table}_{month:%Y_%m}"


def load_copy(remade, months):
    """The copy partitioned by month: [(runs partition, attempts partition)] oldest first."""
    drop_copy()
    run(f"CREATE TABLE {RUNS_P} (LIKE {RUNS} INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS) "
        "PARTITION BY RANGE (created_at)")
    run(f"CREATE TABLE {ATTEMPTS_P} (LIKE {ATTEMPTS} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
        "run_created_at timestamptz NOT NULL) PARTITION BY RANGE (run_created_at)")
    # (PostgreSQL 15 has no identity column on a partitioned table: the ids come from today's sequences.)
    for copy, table in ((RUNS_P, RUNS), (ATTEMPTS_P, ATTEMPTS)):
        run(f"ALTER TABLE {copy} ALTER COLUMN id SET DEFAULT nextval(pg_get_serial_sequence('{table}', 'id'))")
    # Today's tables' storage parameters on every partition (the fillfactors that leave a claim's
    # update room in its page: a HOT update), which LIKE does not copy.
    options = {copy: one("SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class WHERE oid = %s::regclass",
                         [table]) for copy, table in ((RUNS_P, RUNS), (ATTEMPTS_P, ATTEMPTS))}
    parts = []
    for low, high in zip(months, months[1:], strict=False):
        pair = partition_name(RUNS_P, low), partition_name(ATTEMPTS_P, low)
        for table, name in zip((RUNS_P, ATTEMPTS_P), pair, strict=True):
            with_options = f" WITH ({options[table]})" if options[table] else ""
            run(f"CREATE TABLE {name} PARTITION OF {table} FOR VALUES FROM (%s) TO (%s){with_options}", [low, high])
        parts.append(pair)
    run_columns, attempt_columns = ", ".join(columns(RUNS)), ", ".join(columns(ATTEMPTS))
    started = time.monotonic()
    count = run(f"INSERT INTO {RUNS_P} ({run_columns}) SELECT {run_columns} FROM {RUNS}")
    say(f"  the copy's runs: {count:,} in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    selected = ", ".join(f"a.{c}" for c in columns(ATTEMPTS))
    count = run(f"INSERT INTO {ATTEMPTS_P} ({attempt_columns}, run_created_at) SELECT {selected}, r.created_at "
                f"FROM {ATTEMPTS} a JOIN {RUNS} r ON r.id = a.run_id")
    say(f"  the copy's attempts: {count:,} in {time.monotonic() - started:.0f} s")
    statements = [f"ALTER TABLE {RUNS_P} ADD PRIMARY KEY (id, created_at)",
                  f"ALTER TABLE {ATTEMPTS_P} ADD PRIMARY KEY (id, run_created_at)"]
    copies = {RUNS: RUNS_P, ATTEMPTS: ATTEMPTS_P}
    for sql in remade:
        table = copies[re.search(r"^ALTER TABLE (\w+)| ON public\.(\w+) ", sql).group(1, 2)[sql.startswith("CREATE")]]
        if sql.startswith("CREATE"):  # a plain index: the same on the copy, as a partitioned index
            statements.append(re.sub(r"INDEX (\S+) ON public\.(\S+)", r"INDEX p_\1 ON " + table, sql))
        elif "UNIQUE (job_id, scheduled_for)" in sql:  # must name the partition key
            statements.append(f"CREATE UNIQUE INDEX p_run_one_per_slot ON {RUNS_P} (job_id, scheduled_for, created_at)")
        elif "UNIQUE (run_id, number)" in sql:
            statements.append(
                f"CREATE UNIQUE INDEX p_attempt_one_per_number ON {ATTEMPTS_P} (run_id, run_created_at, number)")
        elif f"REFERENCES {RUNS}(id)" in sql:  # the attempts' foreign key to their run
            statements.append(f"ALTER TABLE {ATTEMPTS_P} ADD CONSTRAINT p_attempt_run_fk FOREIGN KEY "
                              f"(run_id, run_created_at) REFERENCES {RUNS_P} (id, created_at) "
                              "DEFERRABLE INITIALLY DEFERRED")
        else:  # the runs' foreign keys to jobs and users
            name, definition = re.match(r'ALTER TABLE \S+ ADD CONSTRAINT "([^"]+)" (.*)', sql).groups()
            statements.append(f'ALTER TABLE {table} ADD CONSTRAINT "p_{name[:50]}" {definition}')
    timed_steps("the copy's indexes and constraints", statements)
    started = time.monotonic()
    run(f"VACUUM ANALYZE {RUNS_P}")
    run(f"VACUUM ANALYZE {ATTEMPTS_P}")
    say(f"  the copy vacuumed and analyzed in {time.monotonic() - started:.0f} s")
    return parts


def sizes():
    """{(table, "heap" | "indexes"): bytes}, a partitioned table's summed over its partitions."""
    found = {}
    for table in (RUNS, ATTEMPTS, RUNS_P, ATTEMPTS_P):
        leaves = ("SELECT relid FROM pg_partition_tree(%s::regclass) WHERE isleaf" if table in (RUNS_P, ATTEMPTS_P)
                  else "SELECT %s::regclass AS relid")
        heap, indexes = rows("SELECT coalesce(sum(pg_table_size(relid)), 0), coalesce(sum(pg_indexes_size(relid)), 0) "
                             f"FROM ({leaves}) AS leaves", [table])[0]
        found[table, "heap"], found[table, "indexes"] = int(heap), int(indexes)
    return found


# --- the pages' queries


def page_queries(jobs, start, end):
    """{page: [SQL it sends about runs or attempts]}, captured from the views over today's tables."""
    User = get_user_model()
    staff, _ = User.objects.get_or_create(username="bench-staff", defaults={"is_staff": True, "is_superuser": True})
    client = Client(SERVER_NAME="localhost")
    client.force_login(staff)
    job = Job.objects.order_by("pk").values_list("pk", flat=True)[jobs // 2]
    middle = start + (end - start) / 2
    deep = position(JobRun.objects.filter(created_at__lte=middle).order_by("-created_at", "-id").first())
    found = {}
    for page, url in (("runs list", "/runs/"), ("runs list, half the history back", f"/runs/?older={deep}"),
                      ("a job's page", f"/jobs/{job}/")):
        for _ in range(2):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
        with CaptureQueriesContext(connection) as captured:
            client.get(url)
        found[page] = [q["sql"] for q in captured.captured_queries
                       if q["sql"].lstrip().upper().startswith("SELECT") and re.search(rf"\b({RUNS}|{ATTEMPTS})\b",
                                                                                        q["sql"])]
    return found


def swapped(sql):
    return re.sub(rf"\b{ATTEMPTS}\b", ATTEMPTS_P, re.sub(rf"\b{RUNS}\b", RUNS_P, sql))


def time_pages(queries, repeat):
    """{page: {"today": [ms], "partitioned": [ms]}}: each sample all the page's run queries, the two
    sides taking turns."""
    found = {}
    with connection.cursor() as cursor:
        for page, sqls in queries.items():
            sides = {"today": sqls, "partitioned": [swapped(sql) for sql in sqls]}
            found[page] = {side: [] for side in sides}
            for i in range(WARMUP + repeat):
                for side, statements in sides.items():
                    started = time.perf_counter()
                    for sql in statements:
                        cursor.execute(sql)
                        cursor.fetchall()
                    if i >= WARMUP:
                        found[page][side].append((time.perf_counter() - started) * 1000)
            say(f"  {page}: {len(sqls)} queries, p50 today {statistics.median(found[page]['today']):.2f} ms, "
                f"partitioned {statistics.median(found[page]['partitioned']):.2f} ms")
    return found


def plan_partitions(sql):
    """How many partitions the copy's plan of ``sql`` reads (scans of a bench_runs_p_/attempts_p_ table)."""
    lines = [r[0] for r in rows(f"EXPLAIN {swapped(sql)}")]
    return sum(1 for line in lines if re.search(rf"on ({RUNS_P}|{ATTEMPTS_P})_\d", line))


# --- the claim


def claim_statements():
    """{side: SQL}: the worker's claim on today's tables, and on the copy by id alone and by id and
    created_at. On the copy the attempt it inserts carries its run's created_at."""
    sql = lifecycle_sql.CLAIM_SQL

    def replace(text, old, new):
        assert text.count(old) == 1, old
        return text.replace(old, new)

    copy = replace(sql, f"UPDATE {RUNS} AS r", f"UPDATE {RUNS_P} AS r")
    copy = replace(copy, f"INSERT INTO {ATTEMPTS} (run_id, number,", f"INSERT INTO {ATTEMPTS_P} (run_id, run_created_at, number,")
    copy = replace(copy, 'SELECT "r__id", %(attempt)s', 'SELECT "r__id", "r__created_at", %(attempt)s')
    copy = replace(copy, "RETURNING ", 'RETURNING r.created_at AS "r__created_at", ')
    by_key = replace(copy, "WHERE r.id = %(run_id)s", "WHERE r.id = %(run_id)s AND r.created_at = %(created_at)s")
    # side: (runs table, attempts table, statement, prepared (True, False or GENERIC), which share of the runs).
    # Prepared by id and created_at, PostgreSQL plans the statement again at each call (plan_cache_mode
    # auto: the generic plan, which prunes no partition when it is made, costs more than a custom one).
    return {"today, by id": (RUNS, ATTEMPTS, sql, True, 0),
            "partitioned, by id": (RUNS_P, ATTEMPTS_P, copy, True, 0),
            "partitioned, by id and created_at": (RUNS_P, ATTEMPTS_P, by_key, True, 1),
            "partitioned, by id and created_at, generic plan": (RUNS_P, ATTEMPTS_P, by_key, GENERIC, 2),
            "partitioned, by id and created_at, not prepared": (RUNS_P, ATTEMPTS_P, by_key, False, 3)}


GENERIC = "force_generic_plan"


def time_claims(count):
    """{side: [ms]} of ``count`` claims each (after 50 not counted), of runs of the newest month put
    back to queued with attempt 2; the sides take turns by rounds of 100. Each run is claimed once on
    each table: today's and the copy's by id alone the same runs, the others runs of their own among
    them (a run claimed twice on the copy would have a longer HOT chain the second time)."""
    statements = claim_statements()
    shares = 1 + max(share for *_, share in statements.values())
    every = rows(f"SELECT id, created_at FROM {RUNS} WHERE status = 'succeeded' ORDER BY id DESC LIMIT %s",
                 [shares * (count + 50)])
    runs_of = [every[i::shares] for i in range(shares)]
    found = {side: [] for side in statements}
    url = database.database_url(settings.DATABASES["default"]["NAME"])
    # As the worker's connection: statements prepared only when asked (jobs.lifecycle.postgres._execute).
    with psycopg.connect(url, autocommit=True, prepare_threshold=lifecycle_sql.PREPARE_ONLY_WHEN_ASKED) as conn:
        bounds = [(0, 50)] + [(i, i + 100) for i in range(50, count + 50, 100)]
        for number, (low, high) in enumerate(bounds):
            order = list(statements.items())
            for side, (runs_table, _, sql, prepare, share) in order[number % len(order):] + order[:number % len(order)]:
                batch = runs_of[share][low:high]
                conn.execute("SET plan_cache_mode = %s" % (GENERIC if prepare == GENERIC else "auto"))
                conn.execute(f"UPDATE {runs_table} SET status = 'queued', attempt = 2, finished_at = NULL "
                             "WHERE id = ANY(%s)", [[pk for pk, _ in batch]])
                claimed = 0
                for pk, created in batch:
                    params = {"run_id": pk, "attempt": 2, "worker": "bench@host", "pid": os.getpid(),
                              "task_id": f"run-{pk}-2", "alone": True, "created_at": created}
                    started = time.perf_counter()
                    with conn.cursor() as cursor:
                        cursor.execute(sql, params, prepare=bool(prepare))
                        claimed += len(cursor.fetchall())
                    if number:
                        found[side].append((time.perf_counter() - started) * 1000)
                assert claimed == len(batch), (side, claimed, len(batch))
        ids = [pk for pk, _ in every]
        for runs_table, attempts_table, *_ in statements.values():
            conn.execute(f"DELETE FROM {attempts_table} WHERE run_id = ANY(%s) AND number > 1", [ids])
            conn.execute(f"UPDATE {runs_table} SET status = 'succeeded', attempt = 1, finished_at = started_at "
                         "WHERE id = ANY(%s)", [ids])
    for side, timings in found.items():
        say(f"  claim {side}: p50 {statistics.median(timings):.3f} ms, p95 {pct(timings, 95):.3f} ms")
    return found


# --- retention


SLOT = "bench_partition_wal"


@contextlib.contextmanager
def wal_kept():
    """A replication slot that keeps the server's WAL from here on until pg_walinspect has read it
    (a checkpoint during a long pass would recycle it otherwise); dropped on the way out."""
    if one("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", [SLOT]):
        run("SELECT pg_drop_replication_slot(%s)", [SLOT])
    run("SELECT pg_create_physical_replication_slot(%s, true)", [SLOT])
    try:
        yield
    finally:
        run("SELECT pg_drop_replication_slot(%s)", [SLOT])


def wal_lsn():
    return one("SELECT pg_current_wal_lsn()")


def wal_between(before, after):
    """(bytes of WAL the server wrote, bytes of its records about this database's pages or None when
    pg_walinspect cannot read them, e.g. a checkpoint recycled them)."""
    total = int(one("SELECT pg_wal_lsn_diff(%s, %s)", [after, before]))
    try:
        dboid = one("SELECT oid FROM pg_database WHERE datname = current_database()")
        started = time.monotonic()
        ours, images = rows("SELECT coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0) "
                            "FROM pg_get_wal_records_info(%s, %s) WHERE block_ref LIKE %s",
                            [before, after, f"%/{dboid}/%"])[0]
        say(f"  (pg_walinspect read {total:,} B of WAL in {time.monotonic() - started:.0f} s)")
        return total, (int(ours), int(images))
    except Exception as exc:  # the extension missing, or the WAL gone
        say(f"  (pg_walinspect: {str(exc).splitlines()[0]})")
        return total, None


def prune_today(cutoff):
    counts = one(f"SELECT count(*) FROM {RUNS} WHERE created_at < %s", [cutoff])
    with wal_kept():
        before = wal_lsn()
        report, wall, _, backend = with_backend(
            retention.prune, now=cutoff + timedelta(days=settings.JOBS_RETENTION_DAYS))
        wal, ours = wal_between(before, wal_lsn())
    say(f"  today's: prune deleted {report.runs:,} runs (of {counts:,} older than the cutoff) in {wall:.1f} s, "
        f"{report.batches} batches of {settings.JOBS_RETENTION_BATCH}; WAL {wal:,} B")
    return {"runs": report.runs, "seconds": wall, "backend": backend, "wal": wal, "wal_ours": ours,
            "detail": f"{report.batches} batches"}


def drop_oldest(parts):
    runs_part, attempts_part = parts[0]
    deleted = one(f"SELECT count(*) FROM {runs_part}")
    statements = [f"ALTER TABLE {ATTEMPTS_P} DETACH PARTITION {attempts_part}", f"DROP TABLE {attempts_part}",
                  f"ALTER TABLE {RUNS_P} DETACH PARTITION {runs_part}", f"DROP TABLE {runs_part}"]
    steps = []

    def drop():
        for sql in statements:
            started = time.perf_counter()
            run(sql)
            steps.append(time.perf_counter() - started)

    with wal_kept():
        before = wal_lsn()
        _, wall, _, backend = with_backend(drop)
        wal, ours = wal_between(before, wal_lsn())
    detail = ", ".join(f"{sql.split()[0].lower()} {sql.split()[-1]} {s * 1000:.0f} ms"
                       for sql, s in zip(statements, steps, strict=True))
    say(f"  the copy's: {deleted:,} runs dropped in {wall:.3f} s ({detail}); WAL {wal:,} B")
    return {"runs": deleted, "seconds": wall, "backend": backend, "wal": wal, "wal_ours": ours, "detail": detail}


# --- the report


def ms(timings):
    return f"{statistics.median(timings):.2f} / {pct(timings, 95):.2f}"


def wal_text(found):
    return "-" if found is None else f"{found[0]:,} B ({found[1]:,} B)"


def mb(value):
    return f"{value / 2**20:,.0f} MB"


def main():
    args = benchenv.arguments(__doc__, runs=(10_000_000, "runs to load (default 10,000,000)"),
                              jobs=(10_000, "jobs the runs belong to (default 10,000)"),
                              repeat=(50, "timed repetitions of each page's queries (default 50)"),
                              claims=(1000, "claims timed on each side (default 1,000)"),
                              keep=(False, "leave the tables loaded at the end"))
    total_started = time.monotonic()
    say(f"load average at start: {load_average()}")
    database.migrate()
    run("SET maintenance_work_mem = '512MB'")
    run("SET work_mem = '64MB'")
    try:
        run("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except Exception as exc:
        say(f"  no pg_walinspect: {exc}")
    now = timezone.now()
    start = month_start(now, -MONTHS_BACK)
    months = [month_start(now, k) for k in range(-MONTHS_BACK, 2)]
    say(f"loading {args.runs:,} runs of {args.jobs:,} jobs, {start:%Y-%m-%d} to now, into today's tables")
    started = time.monotonic()
    remade = load_plain(args.runs, args.jobs, start, now - timedelta(minutes=1))
    load_today = time.monotonic() - started
    say(f"the copy partitioned by month of created_at, {len(months) - 1} partitions")
    started = time.monotonic()
    parts = load_copy(remade, months)
    load_copy_s = time.monotonic() - started
    found_sizes = sizes()

    say("the pages' queries")
    queries = page_queries(args.jobs, start, now)
    pages = time_pages(queries, args.repeat)
    scanned = {page: max((plan_partitions(sql) for sql in sqls), default=0) for page, sqls in queries.items()}
    say("the claim")
    claims = time_claims(args.claims)
    say(f"retention of the oldest month, {months[0]:%Y-%m} (cutoff {months[1]:%Y-%m-%d})")
    today = prune_today(months[1])
    copy = drop_oldest(parts)
    load_end = load_average()

    say("")
    say(f"{args.runs:,} runs of {args.jobs:,} jobs over {len(months) - 1} months ({start:%Y-%m-%d} to now), one "
        f"attempt per started run; {WARMUP} + {args.repeat} repetitions of each page's queries, {args.claims:,} "
        f"claims a side; load average at the end {load_end}")
    say("")
    header = ["figure", "today's tables", "partitioned by month", "partitioned ÷ today's"]
    cells = []
    for page, sides in pages.items():
        cells.append([f"{page}: its {len(queries[page])} run queries, p50 / p95 ms "
                      f"(partitions in the copy's plan: {scanned[page]})",
                      ms(sides["today"]), ms(sides["partitioned"]),
                      ratio(pct(sides["partitioned"], 95), pct(sides["today"], 95))])
    base = claims["today, by id"]
    for side in list(claims)[1:]:
        cells.append([f"the claim, p50 / p95 ms: {side}", ms(base), ms(claims[side]),
                      ratio(pct(claims[side], 95), pct(base, 95))])
    cells += [
        ["retention of the oldest month: runs deleted", f"{today['runs']:,}", f"{copy['runs']:,}", "-"],
        ["retention: wall time", f"{today['seconds']:.1f} s ({today['detail']})", f"{copy['seconds']:.3f} s",
         ratio(copy["seconds"], today["seconds"], "{:.5f}")],
        ["retention: its backend's CPU", f"{today['backend']:.1f} s", f"{copy['backend']:.3f} s",
         ratio(copy["backend"], today["backend"], "{:.5f}")],
        ["retention: WAL, the server's (LSN)", f"{today['wal']:,} B", f"{copy['wal']:,} B",
         ratio(copy["wal"], today["wal"], "{:.5f}")],
        ["retention: WAL records of this database's pages (of which full-page images)", wal_text(today["wal_ours"]),
         wal_text(copy["wal_ours"]), ratio(copy["wal_ours"] and copy["wal_ours"][0],
                                           today["wal_ours"] and today["wal_ours"][0], "{:.5f}")],
    ]
    for table, copy_table in ((RUNS, RUNS_P), (ATTEMPTS, ATTEMPTS_P)):
        for part in ("heap", "indexes"):
            cells.append([f"size of {table}'s {part}", mb(found_sizes[table, part]), mb(found_sizes[copy_table, part]),
                          ratio(found_sizes[copy_table, part], found_sizes[table, part])])
    cells.append(["load: rows, then indexes and constraints", f"{load_today:.0f} s", f"{load_copy_s:.0f} s", "-"])
    markdown(header, cells, "lrrr")
    say("")
    for page, sqls in queries.items():
        for sql in sqls:
            say(f"- {page}: SELECT …{sql[sql.find(' FROM '):][:300]}")
    if not args.keep:
        drop_copy()
        database.empty()
    say(f"\ntotal {time.monotonic() - total_started:.0f} s")


if __name__ == "__main__":
    main()
