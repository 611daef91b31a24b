"""A burst: N trivial runs due in the same second, from the slot to the last run ended, on one real
beat and one real worker ``-c 2``, against raw Celery in the same invocation (issue 35).

Four systems, each --repeat times (the order turned by one each round), on a PostgreSQL and a
redis-server of the bench's own (harness/servers.py):

- ours, bundles off (``JOBS_BUNDLE_MAX_RUNS=0``) and ours, bundles on (the defaults; left out
  while the setting does not exist): N jobs (``--kind function``: ``builtin.noop``; ``command``:
  ``true``; declared ``bundle: short``, or with --new-jobs the default settings) are made, a worker and ``celery beat`` started and warmed (one run through the worker,
  the beat leading), then every job's next slot is set to one second ~15 s away. Beat dispatches
  (ahead of the slot, as it does for a crowded slot), releases the runs at the slot and folds
  their ends; the worker runs them. Slot → last ended is the latest ``finished_at`` less the slot.
- raw Celery, one task per message (``bench/rawcelery.py``: the same delivery settings, no database):
  at the "slot" this process publishes N tasks (``bench.noop``, or ``bench.true`` that forks
  ``true``) through one producer, and one worker ``-c 2`` drains them; the end is when the queue
  and Redis' ``unacked`` hash are empty (seen every 50 ms).
- raw Celery ``chunks``: the same N calls as ``task.chunks(..., size)``, one message per ``size``
  calls (``--chunk-size``, default: the bundles' JOBS_BUNDLE_MAX_RUNS, else 100).

CPU per run: utime+stime (with reaped children) from /proc of beat, the worker's parent and its
pool, every PostgreSQL process but the observer's backend, the redis-server, and for raw Celery this
process while it publishes; from ~12 s before the slot (before the dispatch ahead) to the last end
folded. WAL per run: ``pg_current_wal_lsn()`` over the same span, with pg_stat_wal's flushes and
their time and pg_stat_statements' statements (the breakdown). Runs per second: N ÷ (last end -
first start) for ours, N ÷ (end - slot) for raw Celery (its worker takes the first message at once).

    .venv/bin/python bench/burst.py --runs 10000 --repeat 3
    .venv/bin/python bench/burst.py --runs 10000 --repeat 3 --kind command
    .venv/bin/python bench/burst.py --runs 100000 --repeat 1
    .venv/bin/python bench/burst.py --quick                      # 300 runs, once: does it run

Needs PostgreSQL 15's server binaries with pg_stat_statements and redis-server (as bench/capacity.py).
"""

import argparse
import math
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database, readings
from harness.processes import Processes, beat, end_on_sigterm, wait_until, worker
from harness.servers import Observer, Servers
from harness.table import say

QUEUE = "burst"
RAW_QUEUE = "rawbench"
SERVICE_ENV = {"JOBS_DEFAULT_QUEUE": QUEUE, "JOBS_RETENTION_INTERVAL_SECONDS": "0", "JOBS_SLOT_CHECK_SECONDS": "0"}
# PostgreSQL as in production (fsync and full_page_writes on), pg_stat_statements preloaded,
# track_wal_io_timing on (pg_stat_wal's flush time), a checkpoint an hour at most so that no timed
# checkpoint falls inside a burst.
PG_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top",
               "fsync": "on", "full_page_writes": "on", "checkpoint_timeout": "1h", "max_wal_size": "8GB",
               "track_wal_io_timing": "on", "max_connections": "100"}
OURS_OFF, OURS_ON, RAW, CHUNKS = "ours, bundles off", "ours, bundles on", "raw Celery", "raw Celery chunks"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each row is the median")
    parser.add_argument("--kind", choices=["function", "command"], default="function")
    parser.add_argument("--chunk-size", type=int, help="raw Celery chunks' size (default: the bundles' size)")
    parser.add_argument("--only", nargs="+", choices=["off", "on", "raw", "chunks"], help="some systems only")
    parser.add_argument("--quick", action="store_true", help="300 runs, once")
    parser.add_argument("--new-jobs", action="store_true",
                        help="the jobs as a user makes them (default settings), not declared short")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.repeat = 300, 1
    return args


def start_servers():
    """The private PostgreSQL and redis-server, on spare ports from TEST_PORT_BASE."""
    from tests.chaos.servers import PORT_BASE, free_port

    return Servers(PG_SETTINGS, free_port(PORT_BASE + 150), "redis", free_port(PORT_BASE + 60)).start()


ARGS = parse_args() if __name__ == "__main__" else None
sys.path.insert(0, str(benchenv.REPO))  # tests/ of the repository
SERVERS = start_servers() if ARGS else None
if SERVERS:
    os.environ.update(DATABASE_URL=SERVERS.pg.url, REDIS_URL=SERVERS.broker.url, CELERY_BROKER_URL=SERVERS.broker.url)
REPO = benchenv.setup(**SERVICE_ENV)

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count, Max, Min  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_beat.models import IntervalSchedule  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.models import Job, JobRun, RunStatus  # noqa: E402
from jobs.models.leases import Lease  # noqa: E402

UNFINISHED = [RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING]


def reset():
    """Every table of the jobs, notifications and results emptied (runs, their ends and counts,
    the leader's lease), the queues dropped."""
    database.empty()
    benchenv.drop_queues(settings.CELERY_BROKER_URL, [QUEUE, RAW_QUEUE])


def make_jobs(n, kind):
    """N jobs of a daily interval, their next slot a day away (set to the burst's slot later), and
    the job that warms the worker."""
    interval, _ = IntervalSchedule.objects.get_or_create(every=86400, period=IntervalSchedule.SECONDS)
    kind, target = ("callable", "builtin.noop") if kind == "function" else ("command", "true")
    later = timezone.now() + timedelta(days=1)
    # Declared short (bundle = short) where bundles exist, unless --new-jobs: these jobs have no
    # history yet, and a trivial job that runs every day would have a short one.
    declared = not ARGS.new_jobs and any(f.name == "bundle" for f in Job._meta.fields)
    short = {"bundle": "short"} if declared else {}
    Job.objects.bulk_create([Job(name=f"burst-{i}", kind=kind, target=target, schedule_type="interval",
                                 interval=interval, next_run_at=later, **short) for i in range(n)], batch_size=5000)
    return Job.objects.create(name="warm", kind=kind, target=target, schedule_type="manual")


def measure_ours(observer, n, kind, bundles):
    reset()
    warm_job = make_jobs(n, kind)
    database.analyze()
    env = {} if bundles else {"JOBS_BUNDLE_MAX_RUNS": "0"}
    processes = Processes()
    try:
        processes.start("worker", worker("scheduler_site", QUEUE, name=f"burst-{QUEUE}@%h"), **env)
        processes.start("beat", beat(f"/tmp/bench-burst-beat-{os.getpid()}"), **env)
        warm = lifecycle.create_run(warm_job)
        wait_until(lambda: JobRun.objects.filter(pk=warm.pk, status=RunStatus.SUCCEEDED).exists(), 90,
                   "the worker's first run", processes)
        wait_until(lambda: Lease.objects.filter(last_tick_at__isnull=False).exists(), 60, "beat leading", processes)
        ahead = settings.JOBS_DISPATCH_AHEAD_SECONDS
        slot = datetime.fromtimestamp(math.ceil(time.time() + ahead + 8 + n / 5000), UTC)
        database.execute("UPDATE jobs_job SET next_run_at = %s WHERE name LIKE 'burst-%%'", [slot])
        observer.execute("VACUUM ANALYZE jobs_job")
        time.sleep(max(0.0, slot.timestamp() - ahead - 4 - time.time()))
        if time.time() > slot.timestamp() - ahead - 3:
            say(f"  late: the first reading starts {time.time() - slot.timestamp() + ahead:.1f} s into the dispatch ahead")
        connection.close()
        db_before = database_reading(observer)
        cpu_before = observer.cpu(processes.pids())
        released = watch_burst(observer, n, slot, processes)
        # The leader folds the ends into the pages' figures on its next tick: part of a run's cost.
        wait_until(lambda: not observer.query("SELECT EXISTS (SELECT 1 FROM jobs_runend)")[0][0], 60,
                   "the fold of the ends", processes, step=0.1)
        cpu_after = observer.cpu(processes.pids())
        db_after = database_reading(observer)
        errors = len(processes.error_lines())
    finally:
        processes.stop()
    runs = JobRun.objects.exclude(job=warm_job)
    statuses = dict(runs.values_list("status").annotate(Count("id")))
    span = runs.aggregate(first=Min("started_at"), last=Max("finished_at"))
    starts = sorted((r.started_at - r.scheduled_for).total_seconds()
                    for r in runs.only("started_at", "scheduled_for") if r.started_at)
    found = {
        "slot_to_end": (span["last"] - slot).total_seconds(),
        "rate": n / (span["last"] - span["first"]).total_seconds(),
        "last_queued": released - slot.timestamp(),
        "start_p50": readings.pct(starts, 50), "start_p95": readings.pct(starts, 95),
        "cpu": {name: (cpu_after[name] - cpu_before[name]) * readings.CLOCK_TICK_MS / n for name in cpu_after},
        "statuses": statuses, "errors": errors,
        **database_figures(observer, db_before, db_after, n),
    }
    if statuses.get(RunStatus.SUCCEEDED, 0) != n:
        say(f"  NOT ALL SUCCEEDED: {statuses}")
    return found


def watch_burst(observer, n, slot, processes):
    """Wait for the burst's N runs to end; when (epoch) the last of them left ``pending`` (the
    dispatch ahead makes them pending, beat's release at the slot queues and publishes them)."""
    unfinished = [str(s) for s in UNFINISHED]
    released = None
    deadline = time.monotonic() + max(900, n / 20)
    while True:
        processes.check()
        made, pending, active = observer.query(
            "SELECT count(*), count(*) FILTER (WHERE status = 'pending'), "
            "count(*) FILTER (WHERE status = ANY(%s)) FROM jobs_jobrun", [unfinished])[0]
        now = time.time()
        if released is None and made > n and not pending and now > slot.timestamp():
            released = now
        if released is not None and not active:
            return released
        if time.monotonic() > deadline:
            raise SystemExit(f"the burst's runs did not end: {made - 1:,} made, {active:,} not ended")
        time.sleep(0.25 if n <= 20000 else 1.0)  # the count reads the whole table


def measure_raw(observer, n, kind, chunk_size):
    sys.path.insert(0, str(REPO / "bench"))
    import rawcelery

    benchenv.drop_queues(settings.CELERY_BROKER_URL, [RAW_QUEUE])
    app = rawcelery.make_app(settings.CELERY_BROKER_URL)
    task = app.tasks["bench.noop" if kind == "function" else "bench.true"]
    processes = Processes("burst-raw")
    backlog = benchenv.Backlog(RAW_QUEUE)
    try:
        processes.start("worker", worker("bench.rawcelery", RAW_QUEUE, name=f"burst-{RAW_QUEUE}@%h"))
        with app.connection_for_write() as conn:
            app.amqp.queues[RAW_QUEUE].bind(conn.default_channel).declare()
        task.apply_async(args=[0, 1], queue=RAW_QUEUE)
        time.sleep(0.2)
        wait_until(lambda: backlog.left() == 0, 90, "the raw worker's first task", processes)
        time.sleep(1)
        cpu_before, here_before = observer.cpu(processes.pids()), time.process_time()
        start = time.time()
        if chunk_size:
            task.chunks(((i + 1, 1) for i in range(n)), chunk_size).apply_async(queue=RAW_QUEUE)
        else:
            with app.producer_or_acquire() as producer:
                for i in range(n):
                    task.apply_async(args=[i + 1, 1], queue=RAW_QUEUE, producer=producer)
        published = time.time() - start
        here = time.process_time() - here_before
        drained_twice = []
        wait_until(lambda: drained_twice.append(backlog.left() == 0) or drained_twice[-2:] == [True, True],
                   max(600, n / 50), "raw Celery's drain", processes)
        end = time.time()
        cpu_after = observer.cpu(processes.pids())
        errors = len(processes.error_lines())
    finally:
        backlog.connection.release()
        processes.stop()
    cpu = {name: (cpu_after[name] - cpu_before[name]) * readings.CLOCK_TICK_MS / n for name in cpu_after}
    cpu["publisher (this process)"] = here * 1000 / n
    return {"slot_to_end": end - start, "rate": n / (end - start), "last_queued": published, "cpu": cpu,
            "errors": errors}


def database_reading(observer):
    """The WAL position, pg_stat_wal and pg_stat_statements now (after 2 s: a backend flushes
    its statistics within a second of going idle)."""
    time.sleep(2)
    with observer.conn.transaction():
        lsn = observer.query("SELECT pg_current_wal_lsn()")[0][0]
        wal = observer.query("SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync, wal_write_time, "
                             "wal_sync_time FROM pg_stat_wal")[0]
        commits = observer.query("SELECT xact_commit FROM pg_stat_database WHERE datid = %s", [observer.dbid])[0][0]
        statements = {row[0]: row[1:] for row in observer.query(
            "SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements "
            "WHERE dbid = %s AND userid <> %s", [observer.dbid, observer.userid])}
    return {"lsn": lsn, "wal": wal, "commits": commits, "statements": statements}


def database_figures(observer, before, after, runs):
    """Per run: WAL bytes, records, full-page images, flushes and their time, commits; the statements
    by calls with their time."""
    wal = [a - b for a, b in zip(after["wal"], before["wal"], strict=True)]
    statements = []
    for key, (query, calls, exec_ms) in after["statements"].items():
        prior = before["statements"].get(key, (query, 0, 0.0))
        if calls - prior[1]:
            statements.append((calls - prior[1], exec_ms - prior[2], " ".join(query.split())))
    statements.sort(key=lambda s: -s[1])
    return {
        "wal_bytes": observer.wal_bytes(before, after) / runs,
        "wal_records": wal[0] / runs, "wal_fpi": wal[1] / runs,
        "wal_syncs": wal[4] / runs, "wal_sync_ms": wal[6] / runs, "wal_write_ms": wal[5] / runs,
        "commits": (after["commits"] - before["commits"]) / runs,
        "statement_ms": sum(s[1] for s in statements) / runs,
        "statements": statements,
        "wal_kinds": [(kind, count / runs, size / runs) for kind, count, size in observer.wal_by_kind(before, after)],
        "wal_relations": [(relation, kind, count / runs, size / runs)
                          for relation, kind, count, size in observer.wal_by_relation(before, after)],
    }


def median(rounds, key):
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


ROWS = [  # (label, key, format, factor)
    ("slot → last run ended, s", "slot_to_end", "{:.2f}", 1),
    ("runs per second (first start → last end)", "rate", "{:,.0f}", 1),
    ("slot → no run pending (raw: publishing), s", "last_queued", "{:.2f}", 1),
    ("slot → started p50, ms", "start_p50", "{:,.0f}", 1000),
    ("slot → started p95, ms", "start_p95", "{:,.0f}", 1000),
    ("CPU per run, all processes, ms", "cpu_total", "{:.3f}", 1),
    ("WAL per run, bytes", "wal_bytes", "{:,.0f}", 1),
    ("  WAL records per run", "wal_records", "{:.1f}", 1),
    ("  WAL full-page images per run", "wal_fpi", "{:.3f}", 1),
    ("  WAL flushes per run", "wal_syncs", "{:.3f}", 1),
    ("  WAL flush time per run, ms", "wal_sync_ms", "{:.3f}", 1),
    ("commits per run", "commits", "{:.2f}", 1),
    ("statement time per run, ms", "statement_ms", "{:.3f}", 1),
]


def report(args, results, chunk_size):
    """``results``: {system: [round figures]}."""
    systems = [s for s in (OURS_OFF, OURS_ON, RAW, CHUNKS) if s in results]
    width = 20
    say("")
    say(f"=== burst: {args.runs:,} {args.kind} runs due in one second, one worker -c 2, median of {args.repeat}; "
        f"chunks of {chunk_size}; {readings.uptime()}")
    for rounds in results.values():
        for r in rounds:
            r["cpu_total"] = sum(r["cpu"].values())
    say(f"{'':<46}" + "".join(f"{s:>{width}}" for s in systems))
    for label, key, form, factor in ROWS:
        cells = []
        for system in systems:
            value = median(results[system], key)
            cells.append("-" if value is None else form.format(value * factor))
        say(f"{label:<46}" + "".join(f"{c:>{width}}" for c in cells))
    names = sorted({name for rounds in results.values() for r in rounds for name in r["cpu"]})
    for name in names:
        cells = []
        for system in systems:
            values = [r["cpu"][name] for r in results[system] if name in r["cpu"]]
            cells.append(f"{statistics.median(values):.3f}" if values else "-")
        say(f"{'  CPU ms per run: ' + name:<46}" + "".join(f"{c:>{width}}" for c in cells))
    say("")
    say("each round: slot → last ended s (runs/s, CPU ms per run, WAL B per run)")
    for system in systems:
        say(f"  {system:<20} " + "; ".join(
            f"{r['slot_to_end']:.2f} ({r['rate']:,.0f}/s, {r['cpu_total']:.3f} ms"
            + (f", {r['wal_bytes']:,.0f} B)" if "wal_bytes" in r else ")") for r in results[system]))
    for system in (OURS_OFF, OURS_ON):
        if system in results:
            r = results[system][0]
            say(f"\n{system}, round 1: statements by time (calls per run, ms per call, ms per run); "
                f"runs by status {r['statuses']}, ERROR lines in the logs: {r['errors']}")
            for calls, ms, query in r["statements"][:12]:
                say(f"  {calls / args.runs:7.3f} {ms / calls:7.3f} {ms / args.runs:7.3f}  {query[:120]}")
            say(f"{system}, round 1: WAL by record type (records per run, bytes per run)")
            for kind, count, size in r["wal_kinds"][:10]:
                say(f"  {count:7.2f} {size:8.0f}  {kind}")
            say(f"{system}, round 1: WAL by relation and record type (records per run, bytes per run)")
            for relation, kind, count, size in r.get("wal_relations", [])[:40]:
                say(f"  {count:7.2f} {size:8.0f}  {relation}  {kind}")
    say("")


def main(args):
    end_on_sigterm()
    say(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {readings.uptime()}; PostgreSQL on {SERVERS.pg.port}, "
        f"redis-server on {SERVERS.broker.port}")
    benchenv.use_broker(SERVERS.broker.url)
    database.migrate()
    observer = Observer(SERVERS)
    bundle_size = getattr(settings, "JOBS_BUNDLE_MAX_RUNS", None)
    chunk_size = args.chunk_size or bundle_size or 100
    systems = [OURS_OFF, OURS_ON, RAW, CHUNKS]
    if bundle_size is None:
        say("JOBS_BUNDLE_MAX_RUNS is not a setting here (bundles not merged): no 'bundles on' column")
        systems.remove(OURS_ON)
    if args.only:
        chosen = {"off": OURS_OFF, "on": OURS_ON, "raw": RAW, "chunks": CHUNKS}
        systems = [s for s in systems if s in {chosen[o] for o in args.only}]
    results = {system: [] for system in systems}
    for number in range(args.repeat):
        for system in systems[number % len(systems):] + systems[:number % len(systems)]:
            say(f"round {number + 1}, {system}: {args.runs:,} {args.kind} runs (load average {readings.load_average(' ', '{:.2f}')})")
            if system in (OURS_OFF, OURS_ON):
                r = measure_ours(observer, args.runs, args.kind, bundles=system == OURS_ON)
            else:
                r = measure_raw(observer, args.runs, args.kind, chunk_size if system == CHUNKS else 0)
            results[system].append(r)
            say(f"  slot → last ended {r['slot_to_end']:.2f} s, {r['rate']:,.0f}/s, "
                f"CPU {sum(r['cpu'].values()):.3f} ms per run"
                + (f", WAL {r['wal_bytes']:,.0f} B per run, slot → started p95 {r['start_p95'] * 1000:,.0f} ms"
                   if "wal_bytes" in r else ""))
    reset()
    report(args, results, chunk_size)


if __name__ == "__main__":
    try:
        with SERVERS:
            main(ARGS)
    except KeyboardInterrupt:
        say("interrupted: every process and server started here was ended")
        sys.exit(130)
