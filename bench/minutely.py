"""Issue 46's user scenario: N new cron jobs due every minute (``* * * * *``, the default settings),
applied from a YAML file with ``manage.py jobs apply`` while a real beat and a real worker ``-c 2``
run, then --minutes slots of them, on a private PostgreSQL and redis-server (harness/servers.py).

For each slot after the apply: the runs made and succeeded (and any job with two runs of one slot),
the dispatch lag as the broker saw it (redis-server's MONITOR, watched by this process: each message
pushed onto the queue, timed by the server; a bundle's message carries many runs, and one LPUSH many
messages, so the last push bounds every run's lag: slot → first and last push), slot → started (p50, p99) and
slot → ended (p50, and the last). A run made ahead has its slot as ``queued_at``, so the database
cannot tell when it was published. The goals (issue 46): dispatch p99 ≤ 0.5 s, every run ended ≤ 4 s
after its slot.

    .venv/bin/python bench/minutely.py [--jobs 10000] [--minutes 2]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database, readings
from harness.processes import Processes, beat, end_on_sigterm, wait_until, worker
from harness.servers import Servers
from harness.table import say

QUEUE = "minutely"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--minutes", type=int, default=2, help="slots measured after the apply")
    return parser.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
sys.path.insert(0, str(benchenv.REPO))  # tests/ of the repository
if ARGS:
    from tests.chaos.servers import PORT_BASE, free_port

    SERVERS = Servers({"max_connections": "100"}, free_port(PORT_BASE + 170), "redis", free_port(PORT_BASE + 70)).start()
    os.environ.update(DATABASE_URL=SERVERS.pg.url, REDIS_URL=SERVERS.broker.url, CELERY_BROKER_URL=SERVERS.broker.url)
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE)

import redis  # noqa: E402
import yaml  # noqa: E402
from django.db import connection  # noqa: E402

from jobs.models import JobRun  # noqa: E402
from jobs.models.leases import Lease  # noqa: E402


def write_file(path, n):
    jobs = [{"name": f"minutely-{i:05d}", "kind": "callable", "target": "builtin.noop",
             "schedule": {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}} for i in range(n)]
    with open(path, "w", encoding="utf-8") as out:
        yaml.dump({"jobs": jobs}, out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def apply(path):
    """``manage.py jobs apply`` as a user runs it: (seconds, its last line)."""
    started = time.time()
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "jobs", "apply", path], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise SystemExit(f"jobs apply failed: {done.stderr[-2000:]}")
    return time.time() - started, done.stdout.strip().splitlines()[-1]


class Pushes(threading.Thread):
    """The times (epoch, the server's clock) of the pushes onto QUEUE, from MONITOR: one LPUSH may carry
    many messages (beat publishes a slot's bundles in one)."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.client, self.times = redis.Redis.from_url(url), []

    def run(self):
        try:
            with self.client.monitor() as monitor:
                for command in monitor.listen():
                    words = command["command"].split(" ", 2)
                    if words[0].upper() == "LPUSH" and len(words) > 1 and words[1].startswith(QUEUE):
                        self.times.append(command["time"])
        except redis.ConnectionError:  # the bench's redis-server stopped at the end
            return

    def of(self, slot):
        """(pushes, slot → first, slot → last) of the pushes from 20 s before to 50 s after ``slot``."""
        at = slot.timestamp()
        times = [t - at for t in self.times if -20 <= t - at < 50]
        return len(times), min(times, default=None), max(times, default=None)


def slot_figures(slot):
    runs = list(JobRun.objects.filter(scheduled_for=slot).values_list(
        "job_id", "status", "scheduled_for", "started_at", "finished_at"))

    def after(moments):
        return sorted((moment - slot).total_seconds() for moment in moments if moment is not None)

    started, ended = (after(run[i] for run in runs) for i in (3, 4))
    return {
        "runs": len(runs), "succeeded": sum(status == "succeeded" for _, status, *_ in runs),
        "twice": len(runs) - len({run[0] for run in runs}),
        "start_p50": readings.pct(started, 50), "start_p99": readings.pct(started, 99),
        "end_p50": readings.pct(ended, 50), "end_max": max(ended, default=None), "ended": len(ended),
    }


def main(args):
    end_on_sigterm()
    say(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {readings.uptime()}; {args.jobs:,} cron jobs every minute, "
        f"{args.minutes} slots; PostgreSQL on {SERVERS.pg.port}, redis-server on {SERVERS.broker.port}")
    benchenv.use_broker(SERVERS.broker.url)
    database.migrate()
    processes = Processes()
    pushes = Pushes(SERVERS.broker.url)
    pushes.start()
    with tempfile.TemporaryDirectory(prefix="bench-minutely-") as folder:
        path = os.path.join(folder, "jobs.yaml")
        write_file(path, args.jobs)
        try:
            processes.start("worker", worker("scheduler_site", QUEUE, name=f"bench-{QUEUE}@%h"))
            processes.start("beat", beat(os.path.join(folder, "beat")))
            wait_until(lambda: Lease.objects.filter(last_tick_at__isnull=False).exists(), 60, "beat leading", processes)
            # Applied early in a minute, as the user did (any second: the next slot is the test).
            time.sleep((5 - time.time() % 60) % 60)
            seconds, said = apply(path)
            applied = datetime.now(UTC)
            say(f"jobs apply: {seconds:.1f} s ({said})")
            first = applied.replace(second=0, microsecond=0) + timedelta(minutes=1)
            slots = [first + timedelta(minutes=k) for k in range(args.minutes)]
            last_end = slots[-1] + timedelta(seconds=60)
            wait_until(lambda: datetime.now(UTC) > last_end and JobRun.objects.filter(
                scheduled_for__in=slots, finished_at__isnull=True).count() == 0,
                (last_end - datetime.now(UTC)).total_seconds() + 120, "the slots' runs to end", processes, step=1)
            errors = len(processes.error_lines())
        finally:
            processes.stop()
    connection.close()
    rows = [(slot, {**slot_figures(slot), **dict(zip(("pushes", "first", "last"), pushes.of(slot), strict=True))})
            for slot in slots]
    say(f"\nERROR lines in the logs: {errors}; load average at the end {readings.load_average()} (2 cores)")
    say("| slot (UTC) | runs | succeeded | a job twice | LPUSHes | slot → first / last push, s "
        "| slot → started p50 / p99, s | slot → ended p50 / last, s |")
    say("|---|---:|---:|---:|---:|---:|---:|---:|")
    for slot, f in rows:
        say(f"| {slot:%H:%M} | {f['runs']:,} | {f['succeeded']:,} | {f['twice']} | {f['pushes']:,} | "
            f"{f['first']:.3f} / {f['last']:.3f} | {f['start_p50']:.2f} / {f['start_p99']:.2f} | "
            f"{f['end_p50']:.2f} / {f['end_max']:.2f} |")
    met = all(f["runs"] == args.jobs == f["succeeded"] and not f["twice"] and f["pushes"] and f["last"] <= 0.5
              and f["end_max"] <= 4 for _, f in rows)
    say(f"\ngoals (every run of every slot made once and succeeded, its last push ≤ 0.5 s after "
        f"the slot, the last run ended ≤ 4 s after it): "
        f"{'met' if met else 'NOT met'}")


if __name__ == "__main__":
    try:
        main(ARGS)
    finally:
        SERVERS.close()
