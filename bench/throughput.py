"""Runs per second through the whole pipeline against raw Celery, in one invocation.

Ours: N queued runs of ``builtin.noop`` (run rows created in bulk, their messages published
through ``lifecycle.publish_many``, as the scheduler does), drained by one ``celery worker -c 2 -P prefork``
of the service: claim, attempt row, heartbeat, executor, outcome, events, result, while a thread
folds the ends into the pages' figures every second as the scheduler leader would. Raw: N no-op
tasks of a bare Celery app with the same delivery settings (``bench/rawcelery.py``), drained by
the same kind of worker on the same broker. The queue is filled before the worker starts; the rate
is counted from the first message taken to the last one acknowledged: on Redis the queue and its
``unacked`` hash empty; on RabbitMQ no message ready (and for ours no run unfinished; raw's last
``concurrency`` no-ops may still be in flight, a few of N). RSS of each pool process is read from
/proc when the drain starts and when it ends. ``--broker redis rabbitmq`` runs both in one
invocation (RabbitMQ: a private node on TEST_PORT_BASE's ports, tests/brokers.py).

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_bench9"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench9 REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/throughput.py --runs 20000 --rounds 3 --broker redis rabbitmq
    ... bench/throughput.py --runs 100000 --only ours                 # the drain
    ... bench/throughput.py --runs 2000 --kind command                # runs of the command `true`

Needs an empty database it may fill (it migrates it) and a Redis database of its own (flushed).
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import benchenv
from harness import database, readings
from harness.processes import Processes, worker
from harness.table import say

QUEUE = "bench"
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE, JOBS_RETENTION_INTERVAL_SECONDS="0")

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_results.models import TaskResult  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.models import Job, JobAttempt, JobRun, RunStatus, RunTrigger  # noqa: E402

RAW_QUEUE = "rawbench"
UNFINISHED = [RunStatus.QUEUED, RunStatus.RUNNING]


def reset():
    database.empty()
    benchenv.drop_queues(settings.CELERY_BROKER_URL, [QUEUE, RAW_QUEUE])


def fill_ours(n, kind="callable"):
    target = "builtin.noop" if kind == "callable" else "true"  # a command follows JOBS_COMMAND_ISOLATION
    job = save_job(Job(name="bench-noop", kind=kind, target=target), {"type": "manual"})
    now = timezone.now()
    made = 0
    while made < n:
        size = min(5000, n - made)
        batch = JobRun.objects.bulk_create([
            JobRun(job=job, trigger=RunTrigger.MANUAL, scheduled_for=now + timedelta(microseconds=made + i),
                   status=RunStatus.QUEUED, queued_at=now)
            for i in range(size)])
        lifecycle.publish_many([(run.pk, 1, job) for run in batch])
        made += size
        say(f"  ours: {made:,}/{n:,} runs created and published")


def fill_raw(n):
    sys.path.insert(0, str(REPO / "bench"))
    import rawcelery

    raw = rawcelery.make_app(settings.CELERY_BROKER_URL)
    # reset() deleted the queue; kombu remembers it declared it on a pooled connection and would not
    # declare it again, and RabbitMQ drops what is sent to an exchange with no queue bound.
    with raw.connection_for_write() as connection:
        raw.amqp.queues[RAW_QUEUE].bind(connection.default_channel).declare()
    for i in range(n):
        raw.send_task("bench.noop", args=[i + 1, 1], task_id=f"run-{i + 1}-1", queue=RAW_QUEUE)
        if (i + 1) % 5000 == 0 or i + 1 == n:
            say(f"  raw: {i + 1:,}/{n:,} tasks published")


class Folding(threading.Thread):
    """What the scheduler leader does meanwhile for the pages' figures: fold the ends of runs
    every tick (JOBS_TICK_SECONDS, 1 s), so their cost is in the measurement."""

    def __init__(self):
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.folded = 0
        self.start()

    def run(self):
        try:
            while not self.done.wait(settings.JOBS_TICK_SECONDS):
                self.folded += lifecycle.fold_ends()
        finally:
            connection.close()

    def stop(self):
        self.done.set()
        self.join(timeout=30)
        say(f"  ours: {self.folded:,} ends of runs folded into the pages' figures during the drain")


def drain(which, n, concurrency, profile_dir=None):
    queue = QUEUE if which == "ours" else RAW_QUEUE
    app = "scheduler_site" if which == "ours" else "bench.rawcelery"
    processes = Processes()
    pid = processes.start(which, worker(app, queue, concurrency, f"bench-{which}@%h")).pid
    spies = []
    folding = Folding() if which == "ours" else None
    backlog = benchenv.Backlog(queue)
    try:
        while backlog.waiting() >= n:
            processes.check()
            time.sleep(0.005)
        t0 = time.monotonic()
        pool = readings.children(pid)
        rss_start = [readings.rss_mb(p) for p in pool]
        if profile_dir:
            for child in pool:
                out = Path(profile_dir) / f"{which}-{child}.txt"
                spies.append(subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(child), "-f", "raw", "-r", "200", "--idle",
                                               "-o", str(out)], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        last_say = t0
        empty_since = None
        while True:
            left = backlog.left()
            now = time.monotonic()
            # A message the worker has popped is in neither for a moment: the queue counts as
            # drained when it is seen empty twice, 10 ms apart, and (ours) no run is left unfinished.
            drained = left == 0 and empty_since is not None and now - empty_since >= 0.01
            if drained and (which == "raw" or not JobRun.objects.filter(status__in=UNFINISHED).exists()):
                break
            empty_since = (empty_since or now) if left == 0 else None
            if now - last_say >= 5:
                last_say = now
                say(f"  {which}: {n - left:,}/{n:,} done, {(n - left) / (now - t0):,.0f}/s, "
                    f"pool RSS {' '.join(f'{readings.rss_mb(p):.0f}' for p in pool)} MB")
            processes.check()
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        rss_end = [readings.rss_mb(p) for p in pool]
    finally:
        if folding:
            folding.stop()
        backlog.connection.release()
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            spy.wait(timeout=60)
        processes.stop(grace=20)
    return {"n": n, "seconds": seconds, "rate": n / seconds, "rss_start": rss_start, "rss_end": rss_end,
            "log": processes.logs[which]}


def check_ours(n):
    statuses = dict(JobRun.objects.values_list("status").annotate(c=Count("id")))
    return {
        "succeeded": statuses.get(RunStatus.SUCCEEDED, 0),
        "other": {k: v for k, v in statuses.items() if k != RunStatus.SUCCEEDED},
        "attempts": JobAttempt.objects.filter(outcome="succeeded").count(),
        "task_results": TaskResult.objects.count(),
        "errors": "ERROR" in Path(f"/tmp/bench-throughput-ours-{os.getpid()}.log").read_text(errors="replace"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--only", choices=["ours", "raw"])
    parser.add_argument("--kind", choices=["callable", "command"], default="callable", help="what ours runs")
    parser.add_argument("--profile", metavar="DIR", help="py-spy each pool process of the drain into DIR")
    parser.add_argument("--rounds", type=int, default=1,
                        help="drain raw and ours this many times, alternating; the table adds the medians")
    benchenv.add_broker_option(parser)
    args = parser.parse_args()
    database.migrate()
    for label in benchenv.each_broker(args.broker):
        say(f"=== broker: {label}")
        report(label, [one_round(number, args) for number in range(1, args.rounds + 1)])
        reset()


def one_round(number, args):
    results = {}
    for which in ("raw", "ours"):
        if args.only and which != args.only:
            continue
        reset()
        say(f"round {number}, {which}: filling the queue with {args.runs:,} messages")
        fill_ours(args.runs, args.kind) if which == "ours" else fill_raw(args.runs)
        say(f"round {number}, {which}: draining with one worker, {args.concurrency} prefork processes")
        results[which] = drain(which, args.runs, args.concurrency, args.profile)
        if which == "ours":
            results[which]["check"] = check_ours(args.runs)
    return results


def report(broker, rounds):
    say("")
    say(f"{'broker':>8} {'round':>5} {'system':>6} {'tasks':>8} {'seconds':>8} {'per s':>7} {'ratio':>6}  "
        "pool RSS MB start → end")
    for number, results in enumerate(rounds, 1):
        for which, r in results.items():
            ratio = r["rate"] / results["raw"]["rate"] if "raw" in results else float("nan")
            rss = ", ".join(f"{a:.0f} → {b:.0f}" for a, b in zip(r["rss_start"], r["rss_end"], strict=False))
            say(f"{broker:>8} {number:>5} {which:>6} {r['n']:>8,} {r['seconds']:>8.1f} {r['rate']:>7.0f} "
                f"{ratio:>6.2f}  {rss}")
    if len(rounds) > 1:
        for which in rounds[0]:
            rate = statistics.median(r[which]["rate"] for r in rounds)
            ratio = (statistics.median(r[which]["rate"] / r["raw"]["rate"] for r in rounds)
                     if "raw" in rounds[0] else float("nan"))
            say(f"{broker:>8} {'median':>5} {which:>6} {'':>8} {'':>8} {rate:>7.0f} {ratio:>6.2f}")
    for number, results in enumerate(rounds, 1):
        if "ours" in results:
            c = results["ours"]["check"]
            say(f"{broker}, round {number}, ours: {c['succeeded']:,} runs succeeded (others: {c['other'] or 'none'}), "
                f"{c['attempts']:,} attempts succeeded, {c['task_results']:,} django-celery-results rows, errors "
                f"in the worker log: {'yes, see ' + results['ours']['log'] if c['errors'] else 'none'}")
    say("")

if __name__ == "__main__":
    main()
