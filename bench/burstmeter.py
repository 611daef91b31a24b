"""What bench/burst.py measures with: a private PostgreSQL and redis-server, the Celery processes it starts, and readings of every
process's CPU and of PostgreSQL's WAL and statements before and after a burst.

The servers are the bench's own (tests/chaos/servers.py, tests/brokers.py, on spare ports from
TEST_PORT_BASE), so that the WAL (``pg_current_wal_lsn``) and the CPU of the postmaster's children
and of the redis-server are the burst's alone on a machine shared with other work. PostgreSQL runs
as in production (fsync and full_page_writes on), with ``pg_stat_statements`` preloaded and
``track_wal_io_timing`` on (pg_stat_wal's flush time), a checkpoint an hour at most so no timed
checkpoint falls inside a burst. Readings come from a connection of a role of its own
(``observer``), whose backend's CPU is left out.
"""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchenv

CLOCK_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
PG_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top",
               "fsync": "on", "full_page_writes": "on", "checkpoint_timeout": "1h", "max_wal_size": "8GB",
               "track_wal_io_timing": "on", "max_connections": "100"}


def cpu_ticks(pid):
    """utime + stime + cutime + cstime: the process's own CPU and its reaped children's (a backend
    that exited is in the postmaster's, a command's process in its pool process's)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def own_ticks(pid):
    """utime + stime only: a worker's parent without the pool processes it reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def tree(pid):
    """``pid`` and all its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    todo.extend(int(p) for p in (task / "children").read_text().split())
    return found


def tree_ticks(pid):
    return sum(cpu_ticks(p) for p in tree(pid))


class Servers(contextlib.ExitStack):
    """The private PostgreSQL and redis-server, each ended (by PID) when this closes."""

    def start(self):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ of the repository
        from tests.brokers import PrivateRedis
        from tests.chaos.servers import PORT_BASE, PrivatePostgres, free_port, postgres_bindir

        bindir = postgres_bindir()
        if bindir is None:
            raise SystemExit("no PostgreSQL server binaries (pg_config --bindir): install postgresql-15")
        folder = Path(self.enter_context(tempfile.TemporaryDirectory(prefix="bench-burst-")))
        self.pg = PrivatePostgres(bindir, settings=PG_SETTINGS, port=free_port(PORT_BASE + 150))
        self.callback(self.pg.destroy)
        self.pg.create()
        self.redis = PrivateRedis(folder, port=free_port(PORT_BASE + 60))
        self.callback(self.redis.stop)
        self.redis.start()
        return self

    def pg_ticks(self, leave_out):
        return sum(cpu_ticks(p) for p in self.pg.processes() if p not in leave_out)


class Observer:
    """Readings of the private PostgreSQL through a connection of the role ``observer``."""

    def __init__(self, servers):
        self.servers = servers
        self.conn, self.pid, self.userid, self.dbid = benchenv.observer_connection(servers.pg.url)

    def query(self, sql, params=None):
        return self.conn.execute(sql, params).fetchall()

    def execute(self, sql):
        self.conn.execute(sql)

    def cpu(self, processes):
        """CPU ticks now: {name: ticks} for ``processes`` ({name: pid}; "worker" is split into its
        parent and its pool), PostgreSQL and the broker."""
        found = {"PostgreSQL": self.servers.pg_ticks({self.pid}), "redis-server": tree_ticks(self.servers.redis.proc.pid)}
        for name, pid in processes.items():
            if name == "worker":
                parent = own_ticks(pid)
                found["worker parent"] = parent
                found["worker pool"] = tree_ticks(pid) - parent
            else:
                found[name] = tree_ticks(pid)
        return found

    def database(self):
        """The WAL position, pg_stat_wal and pg_stat_statements now (after 2 s: a backend flushes
        its statistics within a second of going idle)."""
        time.sleep(2)
        with self.conn.transaction():
            lsn = self.query("SELECT pg_current_wal_lsn()")[0][0]
            wal = self.query("SELECT wal_records, wal_fpi, wal_bytes, wal_write, wal_sync, wal_write_time, "
                             "wal_sync_time FROM pg_stat_wal")[0]
            commits = self.query("SELECT xact_commit FROM pg_stat_database WHERE datid = %s", [self.dbid])[0][0]
            statements = {row[0]: row[1:] for row in self.query(
                "SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements "
                "WHERE dbid = %s AND userid <> %s", [self.dbid, self.userid])}
        return {"lsn": lsn, "wal": wal, "commits": commits, "statements": statements}

    def wal_between(self, before, after):
        return float(self.query("SELECT pg_wal_lsn_diff(%s, %s)", [after["lsn"], before["lsn"]])[0][0])

    def wal_kinds(self, before, after):
        """[(resource manager/record type, records, bytes)] written between two readings, largest first."""
        return self.query(
            "SELECT \"resource_manager/record_type\", count, combined_size FROM pg_get_wal_stats(%s, %s, true) "
            "WHERE count > 0 ORDER BY combined_size DESC", [before["lsn"], after["lsn"]])


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
        "wal_bytes": observer.wal_between(before, after) / runs,
        "wal_records": wal[0] / runs, "wal_fpi": wal[1] / runs,
        "wal_syncs": wal[4] / runs, "wal_sync_ms": wal[6] / runs, "wal_write_ms": wal[5] / runs,
        "commits": (after["commits"] - before["commits"]) / runs,
        "statement_ms": sum(s[1] for s in statements) / runs,
        "statements": statements,
        "wal_kinds": [(kind, count / runs, size / runs) for kind, count, size in observer.wal_kinds(before, after)],
    }


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


class Processes:
    """Celery processes started here, each in a session of its own, ended by their process group."""

    def __init__(self, repo):
        self.repo = repo
        self.procs, self.logs = {}, {}

    def start(self, name, argv, env):
        log = f"/tmp/bench-burst-{name}-{argv[4].replace('.', '-')}-{os.getpid()}.log"
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(argv, cwd=self.repo, env=env, start_new_session=True, stdout=out,
                                                stderr=subprocess.STDOUT)
        self.logs[name] = log

    def check(self):
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited; see {self.logs[name]}")

    def pids(self):
        return {name: proc.pid for name, proc in self.procs.items()}

    def errors(self):
        return sum(open(log, errors="replace").read().count("ERROR") for log in self.logs.values())

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def celery(app, *args):
    return [sys.executable, "-m", "celery", "-A", app, *args, "-l", "WARNING"]


def worker_argv(app, queue):
    return celery(app, "worker", "-c", "2", "-P", "prefork", "-Q", queue, "-n", f"burst-{queue}@%h",
                  "--without-gossip", "--without-mingle")


def wait_until(predicate, timeout, what, processes=None, step=0.05):
    deadline = time.monotonic() + timeout
    while not predicate():
        if processes:
            processes.check()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(step)
