"""Readings of processes from /proc (CPU, RSS, descendants), of this connection's PostgreSQL
backend, and of timings (percentiles, repeated calls)."""

import contextlib
import os
import statistics
import subprocess
import time
from pathlib import Path

CLOCK_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """The fields of /proc/<pid>/stat after the command's name; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def proc_cpu(pid):
    """CPU seconds (user + system) a process has used; None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) * CLOCK_TICK_MS / 1000


def own_ticks(pid):
    """utime + stime in clock ticks: a worker's parent without the pool processes it reaped; 0 once gone."""
    fields = _stat(pid)
    return 0 if fields is None else int(fields[11]) + int(fields[12])


def cpu_ticks(pid):
    """utime + stime + cutime + cstime: the process's own CPU and that of the children it reaped
    (a backend that exited is in the postmaster's, a command's process in its pool process's)."""
    fields = _stat(pid)
    return 0 if fields is None else sum(int(fields[i]) for i in (11, 12, 13, 14))


def parent(pid):
    return int(_stat(pid)[1])


def children(pid):
    """The process ids of a process's children (a worker's pool, a postmaster's backends)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


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


def tree_ticks(pid, leave_out=()):
    return sum(cpu_ticks(p) for p in tree(pid) if p not in leave_out)


def rss_mb(pid):
    """Resident memory of a process, in MB; NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024
    except (OSError, StopIteration):
        return float("nan")


def load_average(sep=", ", form="{:.1f}"):
    return sep.join(form.format(x) for x in os.getloadavg())


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pct(values, p):
    """The ``p``th percentile of ``values`` (nearest rank); NaN when there are none."""
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def timed(function, repeat):
    """``function`` called ``repeat`` times: (median seconds, max seconds, its last result)."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), max(seconds), result


# --- this process's PostgreSQL backend (Django's connection of this thread)

def _one(sql):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def backend_pid():
    """The PostgreSQL backend of this thread's connection."""
    return _one("SELECT pg_backend_pid()")[0][0]


def database_backends():
    """{pid: client port} of the backends connected to this database, this thread's included."""
    return dict(_one("SELECT pid, client_port FROM pg_stat_activity WHERE datname = current_database()"))


def postmaster_pid():
    return parent(backend_pid())


def with_backend(function, *args, **kwargs):
    """Run ``function`` once: (its result, wall seconds, CPU seconds of this thread, CPU seconds of
    this thread's PostgreSQL backend)."""
    pg = backend_pid()
    pg0, c0, t0 = proc_cpu(pg), time.thread_time(), time.perf_counter()
    result = function(*args, **kwargs)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    pg1 = proc_cpu(pg)
    return result, wall, cpu, (pg1 - pg0) if pg1 is not None and pg0 is not None else float("nan")
