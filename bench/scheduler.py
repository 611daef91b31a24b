"""Dispatch lag of our scheduler against stock django-celery-beat, in one invocation.

For each N, N jobs due every 60 s with their slots spread evenly over the minute are created, a
scheduler process runs for --seconds, and a consumer in this process pops every published message
off the broker and records when it arrived. Lag = arrival time - slot time. The same schedules run
through stock beat's DatabaseScheduler (as PeriodicTasks with 60 s IntervalSchedules). The leader's
CPU and memory are read from /proc.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench REDIS_URL=redis://127.0.0.1:6379/9 \
        .venv/bin/python bench/scheduler.py --jobs 10000 100000 --seconds 120 --broker redis rabbitmq

Scenarios: `spread` (the default) and `burst` (all N due in the same second) and `edit` (spread, and
one job's schedule edited every second). Needs an empty database it may fill (it migrates it).
``--broker`` takes several: each runs the whole comparison (redis: REDIS_URL, flushed; rabbitmq: a
private node on TEST_PORT_BASE's ports, tests/brokers.py; or a broker URL). The consumer is
``benchenv.Arrivals``: on Redis it pops the queue's lists a thousand messages at a time every
millisecond or two (a kombu consumer, at ~3,200 messages a second, was slower than a burst's
publishing and added its own lag); on RabbitMQ a kombu consumer.
"""

import argparse
import os
import random
import signal
import threading
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database, readings
from harness.processes import Processes, beat
from harness.readings import pct
from harness.table import say

QUEUE = "bench"
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE)

from celery import current_app  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks  # noqa: E402

from jobs.definitions.jobs import apply_schedule  # noqa: E402
from jobs.models import Job, JobRun  # noqa: E402

PERIOD = 60


def reset():
    # TRUNCATE: deleting 100,000 PeriodicTasks through the ORM fires django-celery-beat's change
    # signal once per row and takes many minutes.
    database.empty(JobRun, Job, PeriodicTask)
    PeriodicTasks.update_changed()
    benchenv.drop_queues(settings.CELERY_BROKER_URL, [QUEUE])


def first_slots(n, start, burst):
    return [start if burst else start + timedelta(seconds=PERIOD * i / n) for i in range(n)]


def create_ours(n, start, burst):
    interval, _ = IntervalSchedule.objects.get_or_create(every=PERIOD, period=IntervalSchedule.SECONDS)
    Job.objects.bulk_create(
        [Job(name=f"bench-{i}", kind="callable", target="builtin.noop", schedule_type="interval",
             interval=interval, next_run_at=slot) for i, slot in enumerate(first_slots(n, start, burst))],
        batch_size=5000)


def create_stock(n, start, burst):
    interval, _ = IntervalSchedule.objects.get_or_create(every=PERIOD, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.bulk_create(
        [PeriodicTask(name=f"bench-{i}", task="bench.noop", interval=interval, queue=QUEUE,
                      last_run_at=slot - timedelta(seconds=PERIOD))
         for i, slot in enumerate(first_slots(n, start, burst))], batch_size=5000)
    PeriodicTasks.update_changed()


def shift_schedules(which, seconds):
    with connection.cursor() as cursor:
        if which == "ours":
            cursor.execute(f"UPDATE {Job._meta.db_table} SET next_run_at = next_run_at + %s", [timedelta(seconds=seconds)])
        else:
            cursor.execute(f"UPDATE {PeriodicTask._meta.db_table} SET last_run_at = last_run_at + %s",
                           [timedelta(seconds=seconds)])
    PeriodicTasks.update_changed()


def editor(which, stop):
    """Edit one schedule every second, as people do."""
    while not stop.wait(1.0):
        i = random.randrange(Job.objects.count() or PeriodicTask.objects.count() or 1)
        if which == "ours":
            job = Job.objects.select_related("interval").filter(name=f"bench-{i}").first()
            if job:
                apply_schedule(job, {"type": "interval", "every_seconds": PERIOD})
                job.save()
        else:
            task = PeriodicTask.objects.filter(name=f"bench-{i}").first()
            if task:
                task.description = f"edited {time.time()}"
                task.save()  # what the admin does: bumps PeriodicTasks, beat reloads everything


def lags_ours(arrivals):
    ids = {}
    for t, mid, _ in arrivals:
        if mid and mid.startswith("run-"):
            ids.setdefault(int(mid.split("-")[1]), t)  # the first arrival; a republished copy is not lag
    slots = dict(JobRun.objects.filter(pk__in=list(ids)).values_list("pk", "scheduled_for"))
    return [ids[pk] - slots[pk].timestamp() for pk in ids if pk in slots]


def lags_stock(arrivals, start, n, burst):
    lags = []
    for t, _, name in arrivals:
        if not name or not name.startswith("bench-"):
            continue
        first = start.timestamp() + (0 if burst else PERIOD * int(name[6:]) / n)
        cycles = max(0, int((t - first) // PERIOD))
        lags.append(t - (first + cycles * PERIOD))
    return lags


def run_one(which, n, seconds, scenario):
    reset()
    burst = scenario == "burst"
    start = datetime.now(UTC) + timedelta(seconds=20)
    t0 = time.time()
    (create_ours if which == "ours" else create_stock)(n, start, burst)
    say(f"  {which}: created {n} schedules in {time.time() - t0:.1f}s")
    database.analyze()
    late = (datetime.now(UTC) + timedelta(seconds=10) - start).total_seconds()
    if late > 0:  # creating took longer than planned: move every first slot, so nothing starts due
        start += timedelta(seconds=late)
        shift_schedules(which, late)
    argv = beat(f"/tmp/bench-beat-{os.getpid()}")
    if which == "stock":
        argv += ["-S", "django_celery_beat.schedulers:DatabaseScheduler"]
    # No worker claims these runs: left alone, the monitor would take every run queued for longer
    # than JOBS_REPUBLISH_AFTER_SECONDS for lost by the broker and publish it again.
    consumer = benchenv.Arrivals(current_app.amqp.queues[QUEUE])  # declared as the service declares it
    consumer.start()
    processes = Processes()
    scheduler = processes.start(which, argv, JOBS_REPUBLISH_AFTER_SECONDS="86400")
    stop_edits = threading.Event()
    if scenario == "edit":
        threading.Thread(target=editor, args=(which, stop_edits), daemon=True).start()
    try:
        time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
        cpu0 = readings.proc_cpu(scheduler.pid)
        t_start = time.time()
        while time.time() - t_start < seconds:
            time.sleep(10)
            cpu, rss = readings.proc_cpu(scheduler.pid), readings.rss_mb(scheduler.pid)
            say(f"  {which} N={n}: {time.time() - t_start:4.0f}s  messages={len(consumer)}  "
                f"cpu={100 * (cpu - cpu0) / (time.time() - t_start):.0f}%  rss={rss:.0f} MB")
        cpu, rss = readings.proc_cpu(scheduler.pid), readings.rss_mb(scheduler.pid)
        cpu_share = (cpu - cpu0) / (time.time() - t_start)
    finally:
        stop_edits.set()
        processes.stop(first=signal.SIGKILL)
        time.sleep(0.5)
        consumer.stop.set()
        consumer.join()
    expected = n if burst else int(n * seconds / PERIOD)
    arrivals = [(t, headers.get("id"), headers.get("periodic_task_name"))
                for t, headers in consumer.arrivals() if t <= t_start + seconds]
    lags = lags_ours(arrivals) if which == "ours" else lags_stock(arrivals, start, n, burst)
    if burst:
        lags = [lag for lag in lags if lag < PERIOD]  # the burst's own slot only
    return {"sent": len(lags), "expected": expected, "lags": sorted(lags), "cpu": cpu_share, "rss": rss}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, nargs="+", default=[10000])
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--scenario", choices=["spread", "burst", "edit"], default="spread")
    parser.add_argument("--only", choices=["ours", "stock"])
    benchenv.add_broker_option(parser)
    args = parser.parse_args()
    database.migrate()
    for label in benchenv.each_broker(args.broker):
        rows = []
        for n in args.jobs:
            for which in ("ours", "stock"):
                if args.only and which != args.only:
                    continue
                say(f"{args.scenario} on {label}: {which} scheduler, {n} jobs, {args.seconds}s")
                rows.append((n, which, run_one(which, n, args.seconds, args.scenario)))
        report(label, args, rows)
        reset()


def report(broker, args, rows):
    say("")
    say(f"broker={broker} scenario={args.scenario} window={args.seconds}s period={PERIOD}s")
    say(f"{'N':>7} {'scheduler':>9} {'sent':>8} {'expected':>8} {'p50 lag':>8} {'p99 lag':>8} "
        f"{'max lag':>8} {'CPU':>6} {'RSS MB':>7}")
    by_n = {}
    for n, which, r in rows:
        by_n.setdefault(n, {})[which] = r
        say(f"{n:>7} {which:>9} {r['sent']:>8} {r['expected']:>8} {pct(r['lags'], 50):>8.3f} "
            f"{pct(r['lags'], 99):>8.3f} {(r['lags'] or [float('nan')])[-1]:>8.3f} "
            f"{100 * r['cpu']:>5.1f}% {r['rss']:>7.0f}")
    for n, pair in by_n.items():
        if "ours" in pair and "stock" in pair:
            o, s = pair["ours"], pair["stock"]
            say(f"{n:>7} ratio stock/ours: p99 lag {pct(s['lags'], 99) / max(pct(o['lags'], 99), 1e-3):.1f}x, "
                f"sent {s['sent'] / max(o['sent'], 1):.2f}x, CPU {s['cpu'] / max(o['cpu'], 1e-3):.1f}x")
    say("")


if __name__ == "__main__":
    main()
