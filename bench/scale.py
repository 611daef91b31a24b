"""The whole service at N jobs of a realistic mix (bench/mix.py): load, apply, the scheduler, and the
periodic passes, on a database of its own.

For each N of --jobs, the database is emptied and:

1. load: the N jobs of the mix saved through ``actions.save_many`` (the bulk path of ``jobs apply``,
   bench/mix.py), timed; then ``ANALYZE`` (what autovacuum does after a bulk load within a minute);
2. apply: ``manage.py jobs apply`` of the same N jobs as a JSON file (--apply again: the file of the
   jobs just loaded, so the plan finds nothing to change; --apply create: the jobs are created by
   it instead of by step 1; --apply none: skipped);
3. the scheduler: one ``celery beat`` process of the service for --seconds, its slot check and
   retention periodic tasks off (they are timed in step 4), ``JOBS_REPUBLISH_AFTER_SECONDS=86400``
   (nothing claims the runs: ``benchenv.Arrivals`` in this process takes every message off the
   broker and notes when it arrived, as bench/scheduler.py does; lag = arrival - the run's slot). Every
   job of the mix is a cron job, so every slot is at second 0 of a minute: the CPU the scheduler
   spends from second 15 to 58 of each minute is its CPU when nothing is due; the rest, less that
   idle rate, divided by the runs dispatched in the window, is its CPU per due run (not given with
   --ahead above 0: the runs are then made from second 50 on, inside that span). RSS at the end
   of the window, from /proc. The window starts after the scheduler has caught up the slots that
   fell while the jobs were loading (those runs are dispatched late, on purpose, and left out).
   ``--queued Q``: before the scheduler starts, Q runs queued and never claimed, of a paused job on a
   queue of its own (``park``), as every worker down for a while leaves them: the leader's passes
   that look for running and waiting runs read them all (jobs/scheduling/pacing.py);
4. once the scheduler is stopped: one pass each of the slot check (``slot_report.check_recent()``,
   its default window: the first pass, every job new, and the next pass after --between seconds
   more of the scheduler), retention (``retention.prune()``), the monitor (``monitor.check_once()``)
   and a metrics scrape (``metrics.render()``, what GET /metrics returns): wall time, CPU of this
   process, and CPU of this connection's PostgreSQL backend (from /proc).

    createdb -h 127.0.0.1 -U postgres scheduler_scale
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_scale REDIS_URL=redis://127.0.0.1:6379/6 \\
        .venv/bin/python bench/scale.py --jobs 100000 1000000 --seconds 180

Needs a database it may empty and fill (it migrates it) and a Redis database of its own (flushed).
"""

import io
import os
import signal
import tempfile
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database, readings
from harness.processes import Processes, beat
from harness.readings import pct
from harness.table import markdown, say

QUEUE = "scale"
PASSES_OFF = {"JOBS_SLOT_CHECK_SECONDS": "0", "JOBS_RETENTION_INTERVAL_SECONDS": "0"}
# Nothing claims the runs: the monitor pass must not take every queued run for lost by the broker.
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE, JOBS_REPUBLISH_AFTER_SECONDS="86400", **PASSES_OFF)

import mix  # noqa: E402
from celery import current_app  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_beat.models import CrontabSchedule  # noqa: E402

from jobs.metrics import collector as metrics  # noqa: E402
from jobs.models import Job, JobRun  # noqa: E402
from jobs.operations import retention, slot_report  # noqa: E402
from jobs.scheduling import monitor  # noqa: E402
from jobs.scheduling.scheduler import JobScheduler  # noqa: E402

IDLE_FROM, IDLE_TO = 15, 58  # seconds of each minute in which no slot of the mix is due


def first_arrivals(consumer):
    """{run id: when its first message arrived}, a bundle's runs each at its message's time."""
    ids = {}
    for t, run_id in consumer.run_arrivals():
        ids.setdefault(run_id, t)
    return ids


def apply_file(n, how):
    if how == "none":
        return None
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        path = os.path.join(tmp, "mix.json")
        mix.write_file(path, n)
        out, err = io.StringIO(), io.StringIO()
        t0, c0 = time.perf_counter(), time.process_time()
        call_command("jobs", "apply", path, stdout=out, stderr=err)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": seconds, "cpu": cpu, "result": out.getvalue().strip().splitlines()[-1]}


def backends_cpu(exclude):
    """{pid: CPU s} of this database's backends but ``exclude`` (this process's own)."""
    return {pid: cpu for pid in readings.database_backends() if pid not in exclude
            and (cpu := readings.proc_cpu(pid)) is not None}


def caught_up(processes, consumer, limit=1800):
    """Wait (at most ``limit`` s) until no enabled job's slot is more than 30 s past: the slots that
    fell while the jobs were loading are dispatched (at 10,000,000 jobs, a load of half an hour leaves
    most of a million), and the window measures the steady state."""
    started = time.time()
    while time.time() - started < limit:
        processes.check()
        behind = Job.objects.filter(enabled=True, next_run_at__lt=timezone.now() - timedelta(seconds=30))
        if not behind.exists():
            break
        say(f"    catching up: {time.time() - started:.0f} s, messages={len(consumer):,}")
        time.sleep(10)


def park(queued):
    """``queued`` runs queued and never claimed, of one paused job on a queue nothing consumes: a
    backlog in one statement (``INSERT ... SELECT``, every column the model fills), then VACUUM ANALYZE."""
    from jobs.definitions.jobs import save_job

    job = save_job(Job(name="scale-parked", kind="callable", target="builtin.noop", queue=f"{QUEUE}-parked",
                       enabled=False), {"type": "manual"})
    t0 = time.perf_counter()
    database.execute(
        "INSERT INTO jobs_jobrun (job_id, status, trigger, scheduled_for, attempt, max_attempts, lost_attempts, "
        "created_at, queued_at, publish_count, worker, output, output_bytes, error, reason) "
        "SELECT %s, 'queued', 'manual', now() - interval '1 day' + g * interval '1 ms', 1, 1, 0, now(), now(), 1, "
        "'', '', 0, '', '' FROM generate_series(1, %s) AS g", [job.pk, queued])
    database.execute("VACUUM ANALYZE jobs_jobrun")
    say(f"  {queued:,} runs queued and never claimed, in {time.perf_counter() - t0:.1f} s")


def run_scheduler(seconds, ahead=0.0):
    """One beat process for the window (dispatching ``ahead`` seconds ahead of the slots,
    JOBS_DISPATCH_AHEAD_SECONDS); its CPU idle and per run, dispatch lag, RSS."""
    benchenv.drop_queues(settings.CELERY_BROKER_URL, [QUEUE])
    consumer = benchenv.Arrivals(current_app.amqp.queues[QUEUE])
    consumer.start()
    processes = Processes()
    scheduler = processes.start("beat", beat(f"/tmp/bench-scale-beat-{os.getpid()}"),
                           JOBS_REPUBLISH_AFTER_SECONDS="86400", JOBS_DISPATCH_AHEAD_SECONDS=str(ahead), **PASSES_OFF)
    mine = {readings.backend_pid()}
    try:
        # Let it start and catch up what fell due while the jobs were loading, then begin on the
        # next minute at least 20 s away, a few seconds before its slots.
        time.sleep(20)
        caught_up(processes, consumer)
        now = time.time()
        start = (now // 60 + 1) * 60 - 5
        if start - now < 10:
            start += 60
        time.sleep(start - time.time())
        samples = []  # (epoch, beat CPU s, {backend pid: CPU s})
        t_end = start + seconds
        while True:
            cpu = readings.proc_cpu(scheduler.pid)
            processes.check()
            samples.append((time.time(), cpu, backends_cpu(mine)))
            if samples[-1][0] >= t_end:
                break
            if len(samples) % 20 == 0:
                say(f"    {samples[-1][0] - start:4.0f}s  messages={len(consumer):,}  "
                    f"beat CPU {100 * (cpu - samples[0][1]) / (samples[-1][0] - start):.0f}%  "
                    f"RSS {readings.rss_mb(scheduler.pid):.0f} MB")
            time.sleep(0.5)
        rss = readings.rss_mb(scheduler.pid)
    finally:
        processes.stop(first=signal.SIGKILL)
        time.sleep(0.5)
        consumer.stop.set()
        consumer.join()
    arrived = first_arrivals(consumer)
    slots = dict(JobRun.objects.filter(pk__in=list(arrived)).values_list("pk", "scheduled_for"))
    window_start, window_end = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(t_end, UTC)
    in_window = {pk: at for pk, at in slots.items() if window_start <= at < window_end}
    lags = sorted(arrived[pk] - at.timestamp() for pk, at in in_window.items())
    by_slot = {}  # slot: (runs, the latest lag), to tell which slot a late p99 came from
    for pk, at in in_window.items():
        runs, latest = by_slot.get(at, (0, 0.0))
        by_slot[at] = (runs + 1, max(latest, arrived[pk] - at.timestamp()))
    expected = mix.expected_slots(window_start, window_end)
    idle_cpu = idle_time = total_cpu = 0.0
    pg_total = 0.0
    for (t0, c0, b0), (t1, c1, b1) in zip(samples, samples[1:], strict=False):
        total_cpu += c1 - c0
        pg_total += sum(cpu - b0[pid] for pid, cpu in b1.items() if pid in b0)
        if t0 % 60 >= IDLE_FROM and t1 % 60 < IDLE_TO and t1 > t0 and t1 % 60 > t0 % 60:
            idle_cpu += c1 - c0
            idle_time += t1 - t0
    wall = samples[-1][0] - samples[0][0]
    idle_rate = idle_cpu / idle_time if idle_time else float("nan")
    busy = total_cpu - idle_rate * wall
    return {"sent": len(lags), "expected": expected, "lags": lags, "by_slot": by_slot, "cpu": total_cpu / wall,
            # Dispatching ahead, the runs are made from second 50 on: no span of the minute is idle.
            "idle": idle_rate, "per_run_ms": float("nan") if ahead else 1000 * busy / max(len(lags), 1), "rss": rss,
            "pg": pg_total / wall, "log": processes.logs["beat"]}


def beat_schedule_sync():
    """What the scheduler's DatabaseScheduler base (django-celery-beat) reads at start and every
    SCHEDULE_SYNC_MAX_INTERVAL (300 s), as our scheduler class runs it: its query once grew with
    the crontab schedule rows (celery/django-celery-beat#947; JobScheduler asks for each zone once)."""
    scheduler = JobScheduler.__new__(JobScheduler)
    return f"{len(list(scheduler.enabled_models_qs()))} periodic tasks, {CrontabSchedule.objects.count():,} crontab rows"


def passes(seconds_between, ahead):
    """One pass of each periodic piece. The slot check twice: its first pass looks at every job (a
    job not looked at yet has no place in its schedule); then, after the scheduler has run for
    ``seconds_between`` more, the next pass, which reads only the jobs with a slot since."""
    found = {}
    for name, function in [("slot check, first pass (every job new)", slot_report.check_recent),
                           ("retention", retention.prune),
                           ("monitor", monitor.check_once), ("metrics scrape", metrics.render),
                           ("beat's schedule sync (django-celery-beat)", beat_schedule_sync),
                           (f"slot check, the next pass ({seconds_between} s later)", None)]:
        if function is None:
            say(f"  the scheduler for {seconds_between} s more, for the slot check's next pass")
            run_scheduler(seconds_between, ahead)
            function = slot_report.check_recent
        say(f"  {name} ...")
        result, wall, cpu, pg = readings.with_backend(function)
        if name == "metrics scrape":
            result = f"{len(result[0]):,} bytes"
        elif name == "retention":
            result = f"{result.jobs:,} jobs, {result.runs:,} runs deleted"
        found[name] = (wall, cpu, pg, result)
        say(f"  {name}: {wall:.2f} s, CPU {cpu:.2f} s here + {pg:.2f} s PostgreSQL ({result})")
    return found


def one(n, args):
    say(f"=== {n:,} jobs (load average {readings.load_average()})")
    database.empty()
    row = {"n": n, "mix": mix.describe(n)}
    if args.apply == "create":
        row["load"] = None
        row["apply"] = apply_file(n, "create")
        say(f"  created by jobs apply in {row['apply']['seconds']:.1f} s ({row['apply']['result']})")
    else:
        t0, c0 = time.perf_counter(), time.process_time()
        mix.create(n, progress=lambda done, total: done % 100000 == 0 and say(f"    {done:,}/{total:,} saved"))
        row["load"] = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        say(f"  loaded in {row['load']['seconds']:.1f} s")
        row["apply"] = apply_file(n, args.apply)
        if row["apply"]:
            say(f"  jobs apply of the same jobs: {row['apply']['seconds']:.1f} s ({row['apply']['result']})")
    assert Job.objects.count() == n
    database.analyze()
    row["queued"] = args.queued
    if args.queued:
        park(args.queued)
    row["schedulers"] = {}
    for ahead in args.ahead:
        say(f"  the scheduler for {args.seconds} s, dispatching {ahead:g} s ahead (load average {readings.load_average()})")
        s = row["schedulers"][ahead] = run_scheduler(args.seconds, ahead)
        say(f"  sent {s['sent']:,} of {s['expected']:,}, p99 lag {pct(s['lags'], 99):.3f} s, CPU {100 * s['cpu']:.1f} %, "
            f"idle {100 * s['idle']:.2f} %, {s['per_run_ms']:.3f} ms per run, RSS {s['rss']:.0f} MB")
        late = sorted(s["by_slot"].items(), key=lambda item: -item[1][1])[:5]
        say("  the latest slots: " + "; ".join(f"{slot:%H:%M:%S} {runs:,} runs, {latest:.3f} s"
                                                for slot, (runs, latest) in late))
    row["passes"] = passes(args.between, args.ahead[-1]) if args.between else {}
    row["load average"] = readings.load_average()
    return row


def report(rows, args):
    say("")
    say(f"scale: window {args.seconds} s, apply {args.apply}; load average at the end {readings.load_average()} (2 cores, shared)")
    for row in rows:
        say(f"mix of {row['n']:,}: {row['mix']}")
    say("")
    cells = []
    for row in rows:
        load, applied = row["load"], row["apply"]
        load_text = f"{load['seconds']:.1f} ({row['n'] / load['seconds']:,.0f})" if load else "-"
        apply_text = f"{applied['seconds']:.1f}" if applied else "-"
        for ahead, s in row["schedulers"].items():
            cells.append([f"{row['n']:,}", f"{row['queued']:,}", load_text, apply_text, f"{ahead:g}", f"{s['sent']:,} / {s['expected']:,}",
                          f"{pct(s['lags'], 50):.3f}", f"{pct(s['lags'], 99):.3f}",
                          f"{(s['lags'] or [float('nan')])[-1]:.3f}", f"{100 * s['cpu']:.1f} %",
                          f"{100 * s['idle']:.2f} %", f"{s['per_run_ms']:.3f}", f"{100 * s['pg']:.1f} %",
                          f"{s['rss']:.0f}"])
    markdown(["N", "queued", "load s (jobs/s)", "jobs apply s", "ahead s", "sent / due", "p50 lag s", "p99 lag s",
              "max lag s", "beat CPU", "idle CPU", "CPU per run ms", "beat's PostgreSQL", "beat RSS MB"], cells, "r" * 14)
    say("")
    markdown(["N", "pass", "wall s", "CPU s (Python)", "CPU s (PostgreSQL backend)", "result"],
             [[f"{row['n']:,}", name, f"{wall:.2f}", f"{cpu:.2f}", f"{pg:.2f}", result]
              for row in rows for name, (wall, cpu, pg, result) in row["passes"].items()], "rlrrrl")
    for row in rows:
        if row["apply"]:
            say(f"jobs apply at {row['n']:,}: {row['apply']['seconds']:.1f} s, CPU {row['apply']['cpu']:.1f} s "
                f"({row['apply']['result']})")
    say("")


def main():
    parser = benchenv.parser(__doc__, seconds=360)
    parser.add_argument("--jobs", type=int, nargs="+", default=[100000, 1000000])
    parser.add_argument("--between", type=int, default=150,
                        help="seconds of scheduler between two slot checks (0: no passes timed)")
    parser.add_argument("--ahead", type=float, nargs="+", default=[0.0],
                        help="a scheduler window for each: JOBS_DISPATCH_AHEAD_SECONDS (for the slots "
                             "JOBS_DISPATCH_AHEAD_MIN_JOBS jobs share, from the environment or the default 1,000)")
    parser.add_argument("--apply", choices=["again", "create", "none"], default="again")
    parser.add_argument("--queued", type=int, default=0, help="runs queued and never claimed before the scheduler starts")
    args = parser.parse_args()
    database.migrate()
    say(f"PostgreSQL jit = {database.setting('jit')} (ALTER DATABASE ... SET jit = off: see docs/BENCHMARKS.md, issue 21)")
    benchenv.use_broker(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    rows = []
    for n in args.jobs:
        rows.append(one(n, args))
        report(rows, args)  # after each N: a long run still leaves its figures
    database.empty()


if __name__ == "__main__":
    main()
