"""Check-in pings per second, and their latency, on the real web server: gunicorn as the Procfile runs it
(2 workers, 4 threads), against PostgreSQL and the rate limit's Redis.

Makes ``--jobs`` check-in jobs (a cron schedule, each pinged as a crontab line would), starts gunicorn,
then ``--clients`` client processes, each with ``--threads`` threads holding a keep-alive connection,
send ``GET /ping/<uuid>`` round-robin over the jobs for ``--seconds`` (60 at most: the machine is
shared). Every ping is a real one: it makes (or ends) a run, counts against the rate limits (set high
enough not to refuse) and tells notifications. Prints pings/s, p50/p95/p99/max latency as the clients
saw it (the clients run on the same cores as the server), errors, and the runs recorded.

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_pings"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_pings REDIS_URL=redis://127.0.0.1:6379/4 \\
        SECRET_KEY=x .venv/bin/python bench/pings.py --seconds 30

healthchecks.io's own figure for its Python (Django) ping handler: "about 250 ping requests per
second" on an i7-9700K with uWSGI and wrk (blog.healthchecks.io, 2025-07, "Throughput upgrade").
"""

import http.client
import multiprocessing
import statistics
import threading
import time
import uuid

import benchenv
from harness import database
from harness.processes import Processes, free_port, gunicorn, wait_until
from harness.readings import pct
from harness.table import markdown, say

REPO = benchenv.setup()

from django.db import connection  # noqa: E402

from jobs.definitions.jobs import save_jobs  # noqa: E402
from jobs.models import Job, JobRun  # noqa: E402

GOAL_PER_SECOND, GOAL_P95_MS = 2000, 20
MAX_SECONDS = 60


def seed(count):
    database.empty()
    jobs = [(Job(name=f"pinged-{n:05d}", kind="checkin", target="a crontab elsewhere", grace_seconds=3600),
             {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"}) for n in range(count)]
    errors = save_jobs(jobs)
    assert not errors, errors
    return [str(key) for key in Job.objects.order_by("pk").values_list("ping_key", flat=True)]


def client(port, keys, threads, seconds, start_at, expected, out):
    """One client process: ``threads`` keep-alive connections pinging until ``start_at + seconds``,
    each answer ``expected`` (its HTTP status) or counted as an error."""
    latencies, errors, lock = [], [0], threading.Lock()

    def pinger(offset):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine, n = [], offset
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        while time.time() < end:
            key = keys[n % len(keys)]
            n += threads
            began = time.perf_counter()
            try:
                conn.request("GET", f"/ping/{key}")
                response = conn.getresponse()
                response.read()
                ok = response.status == expected
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
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


def main():
    args = benchenv.parser(__doc__, jobs=(1000, "check-in jobs pinged round-robin"),
                           clients=(2, "client processes"), threads=(8, "keep-alive connections per client"),
                           seconds=(30, f"seconds of load (at most {MAX_SECONDS})"),
                           unknown=(False, "ping uuids no job has (404: the rate limit and one SELECT, no run): "
                                           "the HTTP stack's own ceiling on this machine")).parse_args()
    seconds = min(args.seconds, MAX_SECONDS)
    database.migrate()
    keys = seed(args.jobs)
    say(f"{len(keys)} check-in jobs")
    if args.unknown:
        keys = [str(uuid.uuid4()) for _ in keys]
    port = free_port()
    with Processes() as procs:
        procs.start("web", gunicorn(port), JOBS_PING_RATE_PER_URL="1000000", JOBS_PING_RATE_PER_ADDRESS="100000000",
                    DB_CONN_MAX_AGE="60")
        wait_until(lambda: _answers(port), 60, "gunicorn to listen", procs)
        # Each client's share of the uuids: a job is pinged by one client, as one crontab pings its own.
        out = multiprocessing.Queue()
        start_at = time.time() + 2
        shares = [keys[i::args.clients] for i in range(args.clients)]
        clients = [multiprocessing.Process(target=client, args=(port, share, args.threads, seconds, start_at,
                                                                 404 if args.unknown else 200, out))
                   for share in shares]
        for proc in clients:
            proc.start()
        results = [out.get(timeout=seconds + 120) for _ in clients]
        for proc in clients:
            proc.join()
        procs.check()
    latencies = sorted(ms * 1000 for found, _ in results for ms in found)
    errors = sum(found for _, found in results)
    connection.close()
    runs = JobRun.objects.count()
    rate = len(latencies) / seconds
    markdown(["pings", "seconds", "pings/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors", "runs recorded"],
             [[f"{len(latencies):,}", seconds, f"{rate:,.0f}", f"{statistics.median(latencies):.1f}",
               f"{pct(latencies, 95):.1f}", f"{pct(latencies, 99):.1f}", f"{latencies[-1]:.1f}", errors,
               f"{runs:,}"]], "rrrrrrrrr")
    say(f"goal: {GOAL_PER_SECOND:,} pings/s with p95 <= {GOAL_P95_MS} ms: "
        f"{'met' if rate >= GOAL_PER_SECOND and pct(latencies, 95) <= GOAL_P95_MS else 'not met'}")


def _answers(port):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/ping/00000000-0000-0000-0000-000000000000")
        return conn.getresponse().status == 404
    except OSError:
        return False


if __name__ == "__main__":
    main()
