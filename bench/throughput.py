"""Runs per second through the whole pipeline against raw Celery, in one invocation.

Ours: N queued runs of ``builtin.noop`` (run rows created in bulk, their messages published
through ``runs.publish_many``, as the scheduler does), drained by one ``celery worker -c 2 -P prefork``
of the service: claim, attempt row, heartbeat, executor, outcome, events, result. Raw: N no-op
tasks of a bare Celery app with the same delivery settings (``bench/rawcelery.py``), drained by
the same kind of worker. The queue is filled before the worker starts; the rate is counted from
the first message taken to the last one acknowledged (queue and Redis' ``unacked`` hash empty).
RSS of each pool process is read from /proc when the drain starts and when it ends.

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_bench9"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench9 REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/throughput.py --runs 20000 --rounds 3 # throughput, median of 3
    ... bench/throughput.py --runs 100000 --only ours                 # the drain

Needs an empty database it may fill (it migrates it) and a Redis database of its own (flushed).
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import benchenv

QUEUE = "bench"
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE, JOBS_RETENTION_INTERVAL_SECONDS="0")

import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_results.models import TaskResult  # noqa: E402

from jobs import runs  # noqa: E402
from jobs.definitions import save_job  # noqa: E402
from jobs.models import Job, JobAttempt, JobRun, RunStatus, RunTrigger  # noqa: E402

RAW_QUEUE = "rawbench"
UNFINISHED = [RunStatus.QUEUED, RunStatus.RUNNING]


def say(*parts):
    print(*parts, flush=True)


def reset():
    tables = ["jobs_jobattempt", "jobs_jobrun", "jobs_job", "django_celery_results_taskresult",
              "notifications_delivery"]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


def fill_ours(n):
    job = save_job(Job(name="bench-noop", kind="callable", target="builtin.noop"), {"type": "manual"})
    now = timezone.now()
    made = 0
    while made < n:
        size = min(5000, n - made)
        batch = JobRun.objects.bulk_create([
            JobRun(job=job, trigger=RunTrigger.MANUAL, scheduled_for=now + timedelta(microseconds=made + i),
                   status=RunStatus.QUEUED, queued_at=now)
            for i in range(size)])
        runs.publish_many([(run.pk, 1, job) for run in batch])
        made += size
        say(f"  ours: {made:,}/{n:,} runs created and published")


def fill_raw(n):
    sys.path.insert(0, str(REPO / "bench"))
    from rawcelery import noop

    for i in range(n):
        noop.apply_async(args=[i + 1, 1], task_id=f"run-{i + 1}-1")
        if (i + 1) % 5000 == 0 or i + 1 == n:
            say(f"  raw: {i + 1:,}/{n:,} tasks published")


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024
    except (OSError, StopIteration):
        return float("nan")


def drain(which, n, concurrency, profile_dir=None):
    client = redis.Redis.from_url(settings.REDIS_URL)
    queue = QUEUE if which == "ours" else RAW_QUEUE
    app = "scheduler_site" if which == "ours" else "bench.rawcelery"
    argv = [sys.executable, "-m", "celery", "-A", app, "worker", "-l", "WARNING", "-c", str(concurrency),
            "-P", "prefork", "-Q", queue, "-n", f"bench-{which}@%h", "--without-gossip", "--without-mingle"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    log_path = f"/tmp/bench-throughput-{which}-{os.getpid()}.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(argv, cwd=REPO, env=env, start_new_session=True, stdout=log,
                                  stderr=subprocess.STDOUT)
    spies = []
    try:
        while client.llen(queue) >= n:
            if worker.poll() is not None:
                raise SystemExit(f"the {which} worker exited; see {log_path}")
            time.sleep(0.005)
        t0 = time.monotonic()
        pool = children(worker.pid)
        rss_start = [rss_mb(p) for p in pool]
        if profile_dir:
            for pid in pool:
                out = Path(profile_dir) / f"{which}-{pid}.txt"
                spies.append(subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-f", "raw", "-r", "200", "--idle",
                                               "-o", str(out)], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
        last_say = t0
        empty_since = None
        while True:
            left = client.llen(queue) + client.hlen("unacked")
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
                    f"pool RSS {' '.join(f'{rss_mb(p):.0f}' for p in pool)} MB")
            if worker.poll() is not None:
                raise SystemExit(f"the {which} worker exited; see {log_path}")
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        rss_end = [rss_mb(p) for p in pool]
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            spy.wait(timeout=60)
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    return {"n": n, "seconds": seconds, "rate": n / seconds, "rss_start": rss_start, "rss_end": rss_end,
            "log": log_path}


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
    parser.add_argument("--profile", metavar="DIR", help="py-spy each pool process of the drain into DIR")
    parser.add_argument("--rounds", type=int, default=1,
                        help="drain raw and ours this many times, alternating; the table adds the medians")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    rounds = []
    for number in range(1, args.rounds + 1):
        results = {}
        for which in ("raw", "ours"):
            if args.only and which != args.only:
                continue
            reset()
            say(f"round {number}, {which}: filling the queue with {args.runs:,} messages")
            (fill_ours if which == "ours" else fill_raw)(args.runs)
            say(f"round {number}, {which}: draining with one worker, {args.concurrency} prefork processes")
            results[which] = drain(which, args.runs, args.concurrency, args.profile)
            if which == "ours":
                results[which]["check"] = check_ours(args.runs)
        rounds.append(results)
    say("")
    say(f"{'round':>5} {'system':>6} {'tasks':>8} {'seconds':>8} {'per s':>7} {'ratio':>6}  pool RSS MB start → end")
    for number, results in enumerate(rounds, 1):
        for which, r in results.items():
            ratio = r["rate"] / results["raw"]["rate"] if "raw" in results else float("nan")
            rss = ", ".join(f"{a:.0f} → {b:.0f}" for a, b in zip(r["rss_start"], r["rss_end"], strict=False))
            say(f"{number:>5} {which:>6} {r['n']:>8,} {r['seconds']:>8.1f} {r['rate']:>7.0f} {ratio:>6.2f}  {rss}")
    if len(rounds) > 1:
        for which in rounds[0]:
            rate = statistics.median(r[which]["rate"] for r in rounds)
            ratio = (statistics.median(r[which]["rate"] / r["raw"]["rate"] for r in rounds)
                     if "raw" in rounds[0] else float("nan"))
            say(f"{'median':>5} {which:>6} {'':>8} {'':>8} {rate:>7.0f} {ratio:>6.2f}")
    for number, results in enumerate(rounds, 1):
        if "ours" in results:
            c = results["ours"]["check"]
            say(f"round {number}, ours: {c['succeeded']:,} runs succeeded (others: {c['other'] or 'none'}), "
                f"{c['attempts']:,} attempts succeeded, {c['task_results']:,} django-celery-results rows, errors "
                f"in the worker log: {'yes, see ' + results['ours']['log'] if c['errors'] else 'none'}")
    reset()


if __name__ == "__main__":
    main()
