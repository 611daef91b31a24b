"""Check-in pings per second, and their latency, on the real web server: gunicorn as the Procfile runs it
(2 workers, 4 threads), against PostgreSQL and the queue's Redis, with the scheduler (beat) recording
the queued pings as its leader does.

Makes ``--jobs`` check-in jobs (a cron schedule, each pinged as a crontab line would), starts gunicorn
and beat, then ``--clients`` client processes, each with ``--threads`` threads on a connection of
its own (a new one every ``--per-connection`` pings; 1 is curl's way), send ``GET /ping/<uuid>``
round-robin over the jobs for ``--seconds`` (60 at most: the machine is shared). Every ping is a
real one: it makes (or ends) a run, counts against the rate limits (set high enough not to refuse)
and tells notifications. Prints pings/s, p50/p95/p99/max latency as the clients saw it (the clients
run on the same cores as the server), errors, the runs recorded, how long after the last answer the
last ping was recorded, and the leader's CPU per recorded ping.

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_pings"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_pings REDIS_URL=redis://127.0.0.1:6379/4 \\
        SECRET_KEY=x .venv/bin/python bench/pings.py --seconds 30

healthchecks.io's own figure for its Python (Django) ping handler: "about 250 ping requests per
second" on an i7-9700K with uWSGI and wrk (blog.healthchecks.io, 2025-07, "Throughput upgrade").
"""

import http.client
import multiprocessing
import os
import re
import socket
import statistics
import threading
import time
import uuid

import benchenv
from harness import database, readings
from harness.processes import Processes, beat, free_port, gunicorn, wait_until
from harness.readings import pct
from harness.table import markdown, say

REPO = benchenv.setup()

from django.db import connection  # noqa: E402

from jobs.definitions.jobs import save_jobs  # noqa: E402
from jobs.models import Job, JobRun, Lease  # noqa: E402

GOAL_PER_SECOND, GOAL_P95_MS = 2000, 20
MAX_SECONDS = 60
MAX_RECORDING_SECONDS = 600


def seed(count):
    database.empty()
    jobs = [(Job(name=f"pinged-{n:05d}", kind="checkin", target="a crontab elsewhere", grace_seconds=3600),
             {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"}) for n in range(count)]
    errors = save_jobs(jobs)
    assert not errors, errors
    return [str(key) for key in Job.objects.order_by("pk").values_list("ping_key", flat=True)]


def client(port, keys, threads, seconds, start_at, expected, per_connection, out):
    """One client process: ``threads`` keep-alive connections pinging until ``start_at + seconds``,
    each answer ``expected`` (its HTTP status) or counted as an error. Lean, as wrk is: the requests
    are made once, and an answer is read only as far as its status and length (http.client took as
    much of the shared cores as the server's own work)."""
    latencies, errors, lock = [], [0], threading.Lock()
    requests = [f"GET /ping/{key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() for key in keys]

    def pinger(offset):
        conn, buffer = socket.create_connection(("127.0.0.1", port), timeout=10), b""
        mine, n = [], offset
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        while time.time() < end:
            request = requests[n % len(requests)]
            n += threads
            began = time.perf_counter()
            try:
                if n // threads % per_connection == 0:  # a new connection, as each curl of a crontab makes
                    conn.close()
                    conn, buffer = socket.create_connection(("127.0.0.1", port), timeout=10), b""
                conn.sendall(request)
                status, buffer = _answer(conn, buffer)
                ok = status == expected
            except (OSError, ValueError):
                conn.close()
                conn, buffer = socket.create_connection(("127.0.0.1", port), timeout=10), b""
                ok = False
            if ok:
                mine.append(time.perf_counter() - began)
            else:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=pinger, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put((latencies, errors[0]))


def _answer(conn, buffer):
    """(the HTTP status of the answer on ``conn``, what was read past it)."""
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the connection closed")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head).group(1))
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("the connection closed")
        rest += chunk
    return int(head[9:12]), rest[length:]


def main():
    args = benchenv.parser(__doc__, jobs=(1000, "check-in jobs pinged round-robin"),
                           clients=(2, "client processes"), threads=(8, "keep-alive connections per client"),
                           seconds=(30, f"seconds of load (at most {MAX_SECONDS})"),
                           per_connection=(100, "pings sent on one connection before a new one (1: as each curl of a "
                                                  "crontab does; the default keeps both web workers busy)"),
                           unknown=(False, "ping uuids no job has (404: the rate limit and one SELECT, no run): "
                                           "the HTTP stack's own ceiling on this machine")).parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    database.migrate()
    keys = seed(args.jobs)
    say(f"{len(keys)} check-in jobs")
    if args.unknown:
        keys = [str(uuid.uuid4()) for _ in keys]
    port = free_port()
    queue = _queue()
    with Processes() as procs:
        procs.start("web", gunicorn(port), JOBS_PING_RATE_PER_URL="1000000", JOBS_PING_RATE_PER_ADDRESS="100000000",
                    DB_CONN_MAX_AGE="60")
        # The scheduler leader records the queued pings, as in the Procfile.
        procs.start("beat", beat(f"/tmp/bench-pings-beat-{os.getpid()}"))
        wait_until(lambda: _answers(port), 60, "gunicorn to listen", procs)
        wait_until(lambda: Lease.objects.filter(last_tick_at__isnull=False).exists(), 60, "beat leading", procs)
        beat_ticks = readings.cpu_ticks(procs.pids()["beat"])
        # Each client's share of the uuids: a job is pinged by one client, as one crontab pings its own.
        out = multiprocessing.Queue()
        start_at = time.time() + 2
        shares = [keys[i::args.clients] for i in range(args.clients)]
        clients = [multiprocessing.Process(target=client, args=(port, share, args.threads, seconds, start_at,
                                                                 404 if args.unknown else 200, args.per_connection,
                                                                 out))
                   for share in shares]
        for proc in clients:
            proc.start()
        results = [out.get(timeout=seconds + 120) for _ in clients]
        for proc in clients:
            proc.join()
        load_ended = time.monotonic()
        expected = 0 if args.unknown else sum(len(found) for found, _ in results)
        wait_until(lambda: not queue or not queue.waiting(), MAX_RECORDING_SECONDS, "the queue recorded", procs)
        wait_until(lambda: JobRun.objects.count() >= expected, 60, "every ping's run", procs)
        recorded_after = time.monotonic() - load_ended
        beat_ms = (readings.cpu_ticks(procs.pids()["beat"]) - beat_ticks) * readings.CLOCK_TICK_MS
        procs.check()
    latencies = sorted(ms * 1000 for found, _ in results for ms in found)
    errors = sum(found for _, found in results)
    connection.close()
    runs = JobRun.objects.count()
    rate = len(latencies) / seconds
    markdown(["pings", "seconds", "pings/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors", "runs recorded",
              "all recorded, s after the last", "leader's CPU a ping, ms"],
             [[f"{len(latencies):,}", seconds, f"{rate:,.0f}", f"{statistics.median(latencies):.1f}",
               f"{pct(latencies, 95):.1f}", f"{pct(latencies, 99):.1f}", f"{latencies[-1]:.1f}", errors,
               f"{runs:,}", f"{recorded_after:.1f}", f"{beat_ms / runs:.3f}" if runs else "—"]], "rrrrrrrrrrr")
    say(f"goal: {GOAL_PER_SECOND:,} pings/s with p95 <= {GOAL_P95_MS} ms: "
        f"{'met' if rate >= GOAL_PER_SECOND and pct(latencies, 95) <= GOAL_P95_MS else 'not met'}")


def _queue():
    """The queue of pings (None on a commit without one: its pings are recorded as they come)."""
    try:
        from jobs.lifecycle import ping_queue
    except ImportError:
        return None
    return ping_queue.current()


def _answers(port):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/ping/00000000-0000-0000-0000-000000000000")
        return conn.getresponse().status == 404
    except OSError:
        return False


if __name__ == "__main__":
    main()
