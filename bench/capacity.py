"""A capacity model from measurements: what one run costs PostgreSQL, the broker, the scheduler and
the worker, and from that how many runs per second and worker hosts one PostgreSQL carries.

Everything runs on servers of its own, started here and ended by PID at the end (on success, an
error, Ctrl-C or SIGTERM): a PostgreSQL 15 cluster (port 7550, ``pg_stat_statements`` preloaded with
``track = all``, so the foreign-key checks that triggers run count as statements; fsync and
full_page_writes on as in production, checkpoint_timeout 1 h so no timed checkpoint falls inside a
phase), and a redis-server (port 7450, no persistence) or with ``--broker rabbitmq`` a RabbitMQ node
(port 7490, its own node name, data, logs, cookie and epmd: tests/brokers.py). The schema is
migrated and N jobs are made (``--job noop``: the built-in no-op function; ``--job command``: a
command job running ``true``), each due once, now. Then three phases, each measured alone:

- dispatch: ``jobs.scheduling.dispatch.dispatch_due`` in this process, batch after batch as the
  leader does in a burst, until no job is due: N runs created and published. This process's CPU
  (``time.process_time``) is the scheduler's cost per due run.
- execute: one ``celery worker -P prefork -c 2`` of the service drains the N runs. Its CPU (the
  main process and the pool, with the children they reaped: a command's process) counts from the
  first message taken to the last one done.
- fold: the leader's ``lifecycle.fold_ends`` folds the N ends of runs into the pages' figures.

Around each phase: ``pg_stat_statements`` (calls, time, rows by statement), the WAL written
(``pg_current_wal_lsn``, and ``pg_stat_wal`` for records, full-page images and flushes to disk),
``pg_stat_database`` (commits and rows written), the CPU of every PostgreSQL process (utime+stime of
the postmaster and its children from /proc, with the backends they reaped), the broker's CPU (the
redis-server, or the RabbitMQ node's beam.smp and helpers). The readings come from a connection of
a role of their own (``observer``), whose statements, commits and backend CPU are left out. Stats
are read 2 s after a phase ends and its connections closed: a backend flushes them as it exits.

    .venv/bin/python bench/capacity.py --runs 5000                               # noop on Redis
    .venv/bin/python bench/capacity.py --runs 5000 --prepared-statements off     # behind a pooler
    .venv/bin/python bench/capacity.py --runs 5000 --pg-setting synchronous_commit=off
    .venv/bin/python bench/capacity.py --runs 5000 --broker rabbitmq
    .venv/bin/python bench/capacity.py --runs 5000 --job command

Needs PostgreSQL 15's server binaries (``pg_config --bindir``) with pg_stat_statements (Debian's
postgresql-15 ships it), redis-server, and for ``--broker rabbitmq`` rabbitmq-server. As root the
cluster runs as the ``postgres`` user. ``--port-base`` moves every port (default 7450).
"""

import argparse
import os
import sys
import time
from datetime import timedelta

QUEUE = "bench"
UNFINISHED = ("queued", "running")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5000, help="jobs made due, so runs dispatched and run")
    parser.add_argument("--job", choices=["noop", "command"], default="noop",
                        help="noop: the function job builtin.noop; command: a command job running `true`")
    parser.add_argument("--broker", choices=["redis", "rabbitmq"], default="redis")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a server setting of the private PostgreSQL (repeatable): synchronous_commit=off")
    parser.add_argument("--prepared-statements", choices=["on", "off"], default="on",
                        help="JOBS_PREPARED_STATEMENTS of the worker and this process (off: as behind a "
                             "connection pooler in transaction mode)")
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's prefork processes")
    parser.add_argument("--port-base", type=int, default=7450,
                        help="Redis on it, RabbitMQ on +40, PostgreSQL on +100")
    parser.add_argument("--top", type=int, default=8, help="statements listed per phase, by calls")
    args = parser.parse_args()
    for setting in args.pg_setting:
        if "=" not in setting:
            parser.error(f"--pg-setting {setting!r}: NAME=VALUE")
    return args


ARGS = parse_args() if __name__ == "__main__" else None
# tests/brokers.py and tests/chaos/servers.py take their ports from TEST_PORT_BASE when imported.
os.environ["TEST_PORT_BASE"] = str(ARGS.port_base if ARGS else 7450)
PG_PORT = (ARGS.port_base if ARGS else 7450) + 100

import benchenv  # noqa: E402
from harness import database, readings  # noqa: E402
from harness.processes import Processes, end_on_sigterm, worker  # noqa: E402
from harness.servers import Observer, Servers  # noqa: E402
from harness.table import say  # noqa: E402

REPO = benchenv.setup(
    JOBS_DEFAULT_QUEUE=QUEUE, JOBS_RETENTION_INTERVAL_SECONDS="0", JOBS_SLOT_CHECK_SECONDS="0",
    DATABASE_URL=f"postgres://postgres@127.0.0.1:{PG_PORT}/scheduler",
    JOBS_PREPARED_STATEMENTS="true" if not ARGS or ARGS.prepared_statements == "on" else "false")

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_beat.models import IntervalSchedule  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.models import Job, JobRun  # noqa: E402
from jobs.scheduling import dispatch  # noqa: E402
from tests.chaos.servers import free_port  # noqa: E402

# --- the servers and the readings

def start_servers(args):
    """The private PostgreSQL (on the port --port-base sets, no other) and broker."""
    pg_settings = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
                   "pg_stat_statements.max": "10000", "fsync": "on", "full_page_writes": "on",
                   "checkpoint_timeout": "1h", "max_wal_size": "4GB", "track_io_timing": "on"}
    pg_settings.update(setting.split("=", 1) for setting in args.pg_setting)
    if free_port(PG_PORT) != PG_PORT:
        raise SystemExit(f"port {PG_PORT} is taken: --port-base moves every port")
    servers = Servers(pg_settings, PG_PORT, args.broker, free_port(args.port_base))
    try:
        servers.start()
    except BaseException:
        servers.close()
        raise
    say(f"PostgreSQL on {servers.pg.port} ({servers.pg.folder}), settings: "
        + " ".join(f"{k}={v}" for k, v in pg_settings.items()))
    say(f"{args.broker} on {servers.broker.port}")
    return servers


class Readings(Observer):
    """The observer's readings of a phase: its statements, commits and backend CPU left out."""

    def read(self, worker=None):
        """A reading of every counter (after 2 s: backends flush their stats within a second of idling)."""
        time.sleep(2)
        observer_commits = self.transactions
        with self.conn.transaction():
            self.transactions += 1
            cur = self.conn.cursor()
            lsn = cur.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            wal = cur.execute("SELECT wal_records, wal_fpi, wal_bytes, wal_sync FROM pg_stat_wal").fetchone()
            database = cur.execute(
                "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
                "WHERE datid = %s", [self.dbid]).fetchone()
            statements = {
                (row[0], row[1]): row[1:] for row in cur.execute(
                    "SELECT queryid, query, calls, total_exec_time, rows FROM pg_stat_statements "
                    "WHERE dbid = %s AND userid <> %s", [self.dbid, self.userid])}
            tables = {row[0]: row[1:] for row in cur.execute(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables")}
        return {"lsn": lsn, "wal": wal, "database": database, "statements": statements, "tables": tables,
                "observer_commits": observer_commits, "pg_ticks": self.servers.pg_ticks({self.pid}),
                "broker_ticks": self.servers.broker_ticks(), "cpu": time.process_time()}


def difference(observer, before, after, runs):
    """The phase's figures, per run."""
    commits = (after["database"][0] - before["database"][0]) - (after["observer_commits"] - before["observer_commits"])
    written = sum(after["database"][2:]) - sum(before["database"][2:])
    statements = []
    for key, (query, calls, exec_ms, rows) in after["statements"].items():
        prior = before["statements"].get(key, (query, 0, 0.0, 0))
        if calls - prior[1]:
            statements.append((calls - prior[1], exec_ms - prior[2], rows - prior[3], query))
    statements.sort(key=lambda s: -s[0])
    tables = []
    for name, counts in after["tables"].items():
        prior = before["tables"].get(name, (0, 0, 0, 0))
        delta = [a - b for a, b in zip(counts, prior, strict=True)]
        if any(delta):
            tables.append((name, *delta))
    tables.sort(key=lambda t: -sum(t[1:4]))
    return {
        "commits": commits / runs,
        "rollbacks": (after["database"][1] - before["database"][1]) / runs,
        "statements": sum(s[0] for s in statements) / runs,
        "fk_checks": sum(s[0] for s in statements if "FOR KEY SHARE" in s[3]) / runs,
        "exec_ms": sum(s[1] for s in statements if "FOR KEY SHARE" not in s[3]) / runs,
        "rows_written": written / runs,
        "wal_bytes": observer.wal_bytes(before, after) / runs,
        "wal_records": (after["wal"][0] - before["wal"][0]) / runs,
        "wal_fpi": (after["wal"][1] - before["wal"][1]) / runs,
        "wal_syncs": (after["wal"][3] - before["wal"][3]) / runs,
        "pg_ms": (after["pg_ticks"] - before["pg_ticks"]) * readings.CLOCK_TICK_MS / runs,
        "broker_ms": (after["broker_ticks"] - before["broker_ticks"]) * readings.CLOCK_TICK_MS / runs,
        "top": statements,
        "tables": tables,
        "wal_by_kind": observer.wal_by_kind(before, after),
    }


# --- the phases

def make_jobs(n, kind):
    """N jobs each due once, now: an interval of a day, the next slot a second ago."""
    interval, _ = IntervalSchedule.objects.get_or_create(every=86400, period=IntervalSchedule.SECONDS)
    due = timezone.now() - timedelta(seconds=1)
    target = {"noop": ("callable", "builtin.noop"), "command": ("command", "true")}[kind]
    Job.objects.bulk_create(
        [Job(name=f"capacity-{i}", kind=target[0], target=target[1], schedule_type="interval", interval=interval,
             next_run_at=due + timedelta(microseconds=i)) for i in range(n)], batch_size=5000)
    database.analyze()


def phase_dispatch(observer, n):
    before = observer.read()
    cpu0, t0, runs, batches = time.process_time(), time.monotonic(), 0, 0
    while True:
        report = dispatch.dispatch_due()
        if not report.due_jobs:
            break
        runs += report.runs_created
        batches += 1
    cpu, seconds = time.process_time() - cpu0, time.monotonic() - t0
    connection.close()  # idle from here: its stats are flushed before the reading
    after = observer.read()
    if runs != n:
        raise SystemExit(f"dispatch made {runs} runs of {n}")
    say(f"dispatch: {runs:,} runs in {batches} batches of up to {settings.JOBS_DISPATCH_BATCH:,}, {seconds:.1f} s")
    figures = difference(observer, before, after, n)
    figures["scheduler_ms"] = cpu * 1000 / n
    figures["seconds"] = seconds
    return figures


def phase_execute(observer, n, concurrency):
    backlog = benchenv.Backlog(QUEUE)
    before = observer.read()
    with Processes() as processes:
        worker_pid = processes.start("worker", worker("scheduler_site", QUEUE, concurrency, "capacity@%h")).pid
        try:
            # The worker's start (imports, connections) is not a run's cost: its CPU counts from the
            # first message taken.
            while backlog.waiting() >= n:
                processes.check()
                time.sleep(0.005)
            worker0, t0 = readings.tree_ticks(worker_pid), time.monotonic()
            # Polled every 100 ms, not faster: the polls are the broker's work too.
            while backlog.left():
                processes.check()
                time.sleep(0.1)
            while observer.query(f"SELECT count(*) FROM {JobRun._meta.db_table} WHERE status = ANY(%s)",
                                 [list(UNFINISHED)])[0][0]:
                time.sleep(0.1)
            seconds = time.monotonic() - t0
            worker_ticks = readings.tree_ticks(worker_pid) - worker0
            held = observer.connections()
        finally:
            backlog.connection.release()
    # Read once the worker has gone: a backend flushes its statistics when its connection closes, and
    # an idle one may hold them up to 10 s when the tables' counters were busy.
    after = observer.read()
    say(f"execute: {n:,} runs in {seconds:.1f} s ({n / seconds:,.0f}/s wall clock), "
        f"{held} database connections held by the worker (-c {concurrency})")
    figures = difference(observer, before, after, n)
    figures["worker_ms"] = worker_ticks * readings.CLOCK_TICK_MS / n
    figures["seconds"] = seconds
    figures["connections"] = held
    figures["errors"] = processes.error_lines()
    return figures


def phase_fold(observer, n):
    before = observer.read()
    cpu0, t0, folded = time.process_time(), time.monotonic(), 0
    while step := lifecycle.fold_ends():
        folded += step
    cpu, seconds = time.process_time() - cpu0, time.monotonic() - t0
    connection.close()
    after = observer.read()
    say(f"fold: {folded:,} ends of runs folded in {seconds:.1f} s")
    figures = difference(observer, before, after, n)
    figures["scheduler_ms"] = cpu * 1000 / n
    figures["seconds"] = seconds
    return figures


# --- the report

ROWS = [
    ("commits", "commits", "{:.2f}"),
    ("statements", "statements", "{:.1f}"),
    ("fk_checks", "  of them foreign-key checks", "{:.1f}"),
    ("exec_ms", "statement time ms (no FK checks)", "{:.3f}"),
    ("rows_written", "rows written", "{:.1f}"),
    ("wal_bytes", "WAL bytes", "{:,.0f}"),
    ("wal_records", "WAL records", "{:.1f}"),
    ("wal_fpi", "WAL full-page images", "{:.3f}"),
    ("wal_syncs", "WAL flushes to disk", "{:.2f}"),
    ("pg_ms", "PostgreSQL CPU ms", "{:.3f}"),
    ("broker_ms", "broker CPU ms", "{:.3f}"),
    ("scheduler_ms", "scheduler CPU ms", "{:.3f}"),
    ("worker_ms", "worker CPU ms", "{:.3f}"),
]


def report(args, phases, n):
    say("")
    say(f"=== per run: {n:,} runs, --job {args.job}, --broker {args.broker}, prepared statements "
        f"{args.prepared_statements}, worker -c {args.concurrency}"
        + (f", {' '.join(args.pg_setting)}" if args.pg_setting else ""))
    names = list(phases)
    say(f"{'':<34}" + "".join(f"{name:>11}" for name in names) + f"{'total':>11}")
    total = {}
    for key, label, form in ROWS:
        values = [phases[name].get(key) for name in names]
        present = [v for v in values if v is not None]
        total[key] = sum(present)
        say(f"{label:<34}" + "".join(f"{(form.format(v) if v is not None else '-'):>11}" for v in values)
            + f"{form.format(total[key]):>11}")
    for name in names:
        say(f"\n{name}: top statements by calls per run (calls, ms per call, rows per call)")
        for calls, exec_ms, rows, query in phases[name]["top"][:args.top]:
            text = " ".join(query.split())
            say(f"  {calls / n:7.3f}  {exec_ms / calls:7.3f}  {rows / calls:7.2f}  {text[:110]}")
        say(f"{name}: rows written by table per run (inserted, updated, deleted, of the updates HOT)")
        for table, ins, upd, dele, hot in phases[name]["tables"][:6]:
            say(f"  {table:<36} {ins / n:6.2f} {upd / n:6.2f} {dele / n:6.2f} {hot / n:6.2f}")
        say(f"{name}: WAL by kind of record per run (records, bytes with full-page images)")
        for kind, records, size in phases[name]["wal_by_kind"][:8]:
            say(f"  {kind:<36} {records / n:6.2f} {float(size) / n:8,.0f}")
    pg, worker, broker = total["pg_ms"], total["worker_ms"], total["broker_ms"]
    scheduler = total["scheduler_ms"]
    per_core = 1000 / pg
    connections = phases["execute"]["connections"]
    say("\n=== the model (CPU per run -> capacity; 1 core = 1000 CPU ms per second)")
    say(f"runs/s one PostgreSQL core carries:          {per_core:,.0f}  (1000 / {pg:.3f} ms)")
    say(f"worker cores per 1,000 runs/s:               {worker:.2f}")
    say(f"worker cores one PostgreSQL core keeps busy: {worker / pg:.1f}  "
        f"(2-core worker hosts: {worker / pg / 2:.1f})")
    say(f"broker cores per 1,000 runs/s:               {broker:.2f}  (runs/s per broker core: {1000 / broker:,.0f})")
    say(f"scheduler (leader) cores per 1,000 runs/s:   {scheduler:.2f}  "
        f"(runs/s per leader core: {1000 / scheduler:,.0f})")
    say(f"commits/s at 1,000 runs/s:                   {total['commits'] * 1000:,.0f}")
    say(f"WAL at 1,000 runs/s:                         {total['wal_bytes'] * 1000 / 1e6:.1f} MB/s")
    say(f"database connections: {connections} for one worker with -c {args.concurrency} "
        f"(one per pool process and the main process's, if any)")
    errors = phases["execute"]["errors"]
    say(f"errors in the worker log: {len(errors)}" + "".join(f"\n  {line[:300]}" for line in errors[:10]))


def check(n):
    statuses = dict(JobRun.objects.values_list("status").annotate(c=Count("id")))
    say(f"runs by status: {statuses}")
    if statuses.get("succeeded", 0) != n:
        raise SystemExit(f"expected {n} runs succeeded: {statuses}")


def main(args):
    end_on_sigterm()
    say(f"{time.strftime('%Y-%m-%d %H:%M:%S')}  load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    with start_servers(args) as servers:
        benchenv.use_broker(servers.broker.url)
        database.migrate()
        observer = Readings(servers)
        say(f"making {args.runs:,} {args.job} jobs, each due once")
        make_jobs(args.runs, args.job)
        connection.close()
        phases = {"dispatch": phase_dispatch(observer, args.runs)}
        phases["execute"] = phase_execute(observer, args.runs, args.concurrency)
        phases["fold"] = phase_fold(observer, args.runs)
        check(args.runs)
        connection.close()
        report(args, phases, args.runs)
        say(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    try:
        main(ARGS)
    except KeyboardInterrupt:
        say("interrupted: everything started here was ended")
        sys.exit(130)
