"""A soak of the whole service: --jobs jobs of the mix (bench/mix.py) run for --minutes by real
processes, the cost of each part measured and every slot accounted for at the end.

Processes started here, on a database and a Redis database of their own:

- the service's scheduler: ``celery -A scheduler_site beat`` (dispatch, the monitor, the ends
  folded into the pages' figures);
- one worker: ``celery -A scheduler_site worker -P prefork -c 2``, running every run (``builtin.noop``).

Both run with the service's own periodic slot check and retention off (``JOBS_SLOT_CHECK_SECONDS=0``,
``JOBS_RETENTION_INTERVAL_SECONDS=0``): this process runs those passes itself, at the service's
cadence, each in a thread of its own so its CPU is that thread's (``time.thread_time``) plus that of
the thread's PostgreSQL backend (from /proc):

- the slot check (``slot_report.check_recent()``) every JOBS_SLOT_CHECK_SECONDS of the service's
  default (600 s), the first 600 s in, as the scheduler does;
- retention (``retention.prune()``) every JOBS_RETENTION_INTERVAL_SECONDS of the service's default
  (3,600 s);
- a metrics scrape (``metrics.render()``, the body of GET /metrics) every 15 s, as Prometheus would;
- the monitor (``monitor.check_once()``) every JOBS_MONITOR_SECONDS (5 s): a second copy of what
  the scheduler leader runs, timed here on its own;
- the overview page (``/``) as a logged-in staff user through Django's test Client every 5 s (the
  web's CPU is that thread's and its backend's).

A pass whose cadence is longer than half the soak runs once, at half time, and its share of a core
is its CPU divided by its cadence (what it costs in steady state); the others' share is their CPU
over the soak. The CPU of the scheduler, the worker's parent and its pool processes is read from
/proc every 5 s; PostgreSQL's is the sum over the backends of the soak's database (every 5 s, per
backend; a connection that lives less than 5 s is missed) and, for reference, over every child of
the postmaster (which includes the other users of the server).

At the end the scheduler is stopped, the worker drains what was queued, and:

- every slot accounted for: ``slot_report.check_recent`` over a window that covers the soak, every
  job's place in its schedule reset first so that every slot is looked at again (no slot missing), ``slot_report.build`` per job for the every-minute jobs (ran / skipped / missing),
  and the runs created against the slots the enabled jobs had (``mix.expected_slots``);
- no run stuck: none pending, queued, running or retrying after the drain;
- the database's growth: the runs and attempts tables (``pg_total_relation_size``) and the database
  (``pg_database_size``) before and after, scaled to a day; and with retention, the size at which
  retention's policy holds the history (each job keeps its runs of JOBS_RETENTION_DAYS, at least its
  newest JOBS_RETENTION_MIN_RUNS), from the bytes per run measured here.

    createdb -h 127.0.0.1 -U postgres scheduler_soak
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_soak REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/soak.py --jobs 100000 --minutes 30
"""

import os
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta

import benchenv
from harness import database, readings
from harness.processes import Processes, beat, worker
from harness.table import markdown

QUEUE = "soak"
PASSES_OFF = {"JOBS_SLOT_CHECK_SECONDS": "0", "JOBS_RETENTION_INTERVAL_SECONDS": "0"}
REPO = benchenv.setup(JOBS_DEFAULT_QUEUE=QUEUE, **PASSES_OFF)

import mix  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.test import Client  # noqa: E402

from jobs.execution import publishing  # noqa: E402
from jobs.metrics import collector as metrics  # noqa: E402
from jobs.models import ACTIVE_STATUSES, Job, JobRun, RunTrigger  # noqa: E402
from jobs.operations import retention, slot_report  # noqa: E402
from jobs.scheduling import monitor  # noqa: E402

SLOT_CHECK_SECONDS = 600  # the service's defaults (settings.py), turned off in the processes
RETENTION_SECONDS = 3600
SCRAPE_SECONDS = 15
OVERVIEW_SECONDS = 5
SAMPLE_SECONDS = 5


def say(*parts):
    print(f"{time.strftime('%H:%M:%S')}", *parts, flush=True)


class Periodic(threading.Thread):
    """Runs ``function`` every ``every`` seconds (the first time after ``first``) until stopped,
    noting (wall, CPU of the thread, CPU of its PostgreSQL backend) of each pass."""

    def __init__(self, name, function, every, first, stop):
        super().__init__(daemon=True, name=name)
        self.function, self.every, self.first, self.stop_event = function, every, first, stop
        self.passes, self.errors, self.last = [], [], None

    def run(self):
        try:
            due = time.monotonic() + self.first
            while not self.stop_event.wait(max(0.0, due - time.monotonic())):
                try:
                    self.last, wall, cpu, pg = readings.with_backend(self.function)
                    self.passes.append((wall, cpu, pg))
                except Exception as exc:  # a soak notes a failing pass and goes on
                    self.errors.append(repr(exc))
                due += self.every
        finally:
            connection.close()

    def cpu(self):
        return sum(c for _, c, _ in self.passes), sum(p for _, _, p in self.passes if p == p)


class Sampler(threading.Thread):
    """CPU of the processes from /proc every SAMPLE_SECONDS, summed per kind over pids as they come and go."""

    def __init__(self, beat, worker, stop):
        super().__init__(daemon=True, name="sampler")
        self.beat, self.worker, self.stop_event = beat, worker, stop
        self.seen = {}  # (kind, pid) -> last CPU s
        self.total = {}  # kind -> CPU s since the start
        self.rss = {}  # kind -> [MB]
        self.postmaster = readings.postmaster_pid()
        self.lock = threading.Lock()

    def sample(self):
        pids = [("beat", self.beat), ("worker parent", self.worker)]
        pids += [("pool children", pid) for pid in readings.children(self.worker)]
        pids += [("PostgreSQL (the soak's database)", pid) for pid in readings.database_backends()]
        pids += [("PostgreSQL (all of the server)", pid) for pid in readings.children(self.postmaster)]
        with self.lock:
            for kind, pid in pids:
                cpu = readings.proc_cpu(pid)
                if cpu is None:
                    continue
                before = self.seen.get((kind, pid))
                self.seen[(kind, pid)] = cpu
                self.total.setdefault(kind, 0.0)
                if before is not None:
                    self.total[kind] += cpu - before
                if not kind.startswith("PostgreSQL"):
                    self.rss.setdefault(kind, []).append(readings.rss_mb(pid))

    def run(self):
        try:
            while not self.stop_event.wait(SAMPLE_SECONDS):
                self.sample()
        finally:
            connection.close()


def overview(client):
    def request():
        response = client.get("/")
        if response.status_code != 200:
            raise RuntimeError(f"overview: HTTP {response.status_code}")
        return response.status_code
    return request


def active_runs():
    return dict(JobRun.objects.filter(status__in=ACTIVE_STATUSES).values_list("status").annotate(n=Count("id")))


def drain(processes, timeout):
    """Wait until the queue is empty and no run is active; seconds it took, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        depth = publishing.queue_depth([QUEUE]).get(QUEUE)
        if depth == 0 and not active_runs():
            return time.monotonic() - t0
        if processes.procs["worker"].poll() is not None:
            return None
        time.sleep(2)
    return None


def slot_accounting(load_started, stopped):
    grace = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + settings.JOBS_TICK_SECONDS * 5)
    window = (stopped - load_started).total_seconds() + 60
    # The periodic passes moved every job's place past what they looked at: from the window's
    # start again, so this check looks at every slot of the soak (and alerts none already alerted).
    Job.objects.update(slot_check_from=None)
    check, wall, cpu, pg = readings.with_backend(slot_report.check_recent, now=stopped, window=window)
    outcomes = {}
    every_minute = Job.objects.filter(enabled=True, crontab__minute="*").select_related("crontab")
    for job in every_minute:
        report = slot_report.build(job, load_started, stopped - grace, now=stopped)
        for slot in report.slots:
            outcomes[slot.outcome] = outcomes.get(slot.outcome, 0) + 1
    return {"check_recent": check, "check seconds": wall, "every minute": outcomes,
            "every minute jobs": every_minute.count(), "end": stopped - grace}


def growth(before, after, seconds, runs, n_jobs_by_kind):
    per_day = {name: (after[name] - before[name]) * 86400 / seconds for name in before}
    run_bytes = (after["jobs_jobrun"] + after["jobs_jobattempt"] - before["jobs_jobrun"] - before["jobs_jobattempt"])
    per_run = run_bytes / runs if runs else float("nan")
    days, min_runs = settings.JOBS_RETENTION_DAYS, settings.JOBS_RETENTION_MIN_RUNS
    per_day_of = {"every minute": 1440, "hourly": 24, "daily": 1}
    kept = {kind: n_jobs_by_kind[kind] * max(min_runs, per_day_of[kind] * days) for kind in per_day_of}
    return {"per day": per_day, "bytes per run": per_run, "kept runs": kept,
            "plateau bytes": sum(kept.values()) * per_run,
            "runs per day": sum(n_jobs_by_kind[k] * per_day_of[k] for k in per_day_of),
            "days to plateau": {kind: max(days, min_runs / per_day_of[kind]) for kind in per_day_of}}


def main():
    args = benchenv.arguments(__doc__, jobs=100000, minutes=30.0, drain_timeout=600.0)
    duration = args.minutes * 60
    database.migrate()
    say(f"PostgreSQL jit = {database.setting('jit')} (ALTER DATABASE ... SET jit = off: see docs/BENCHMARKS.md, issue 21)")
    benchenv.use_broker(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    benchenv.drop_queues(settings.CELERY_BROKER_URL, [QUEUE])
    database.empty()
    say(f"soak: {args.jobs:,} jobs, {args.minutes:g} min; load average {readings.load_average()} (2 cores, shared)")
    load_started = datetime.now(UTC)
    seconds = mix.create(args.jobs)
    say(f"loaded {args.jobs:,} jobs in {seconds:.1f} s: {mix.describe(args.jobs)}")
    database.execute("VACUUM ANALYZE")
    staff, _ = User.objects.get_or_create(username="soak-staff", defaults={"is_staff": True, "is_superuser": True})
    client = Client(SERVER_NAME="localhost")
    client.force_login(staff)
    before = database.table_sizes()

    processes = Processes()
    scheduler = processes.start("beat", beat(f"/tmp/bench-soak-beat-{os.getpid()}"), **PASSES_OFF)
    pool = processes.start("worker", worker("scheduler_site", QUEUE, name=f"soak-{os.getpid()}@%h"), **PASSES_OFF)
    stopping = threading.Event()
    half = duration / 2
    threads = [
        Periodic("slot check", slot_report.check_recent, SLOT_CHECK_SECONDS, min(SLOT_CHECK_SECONDS, half), stopping),
        Periodic("retention", retention.prune, RETENTION_SECONDS, min(RETENTION_SECONDS, half), stopping),
        Periodic("metrics scrape", metrics.render, SCRAPE_SECONDS, SCRAPE_SECONDS, stopping),
        Periodic("monitor", monitor.check_once, settings.JOBS_MONITOR_SECONDS, settings.JOBS_MONITOR_SECONDS, stopping),
        Periodic("overview page (web)", overview(client), OVERVIEW_SECONDS, OVERVIEW_SECONDS, stopping),
    ]
    time.sleep(3)  # the processes up, the pool forked
    sampler = Sampler(scheduler.pid, pool.pid, stopping)
    sampler.sample()
    started = time.monotonic()
    started_at = datetime.now(UTC)
    sampler.start()
    for thread in threads:
        thread.start()
    try:
        while time.monotonic() - started < duration:
            time.sleep(min(60, duration - (time.monotonic() - started)))
            processes.check()
            elapsed = time.monotonic() - started
            with sampler.lock:
                shares = ", ".join(f"{kind} {100 * cpu / elapsed:.1f} %" for kind, cpu in sampler.total.items())
            say(f"{elapsed / 60:5.1f} min: {JobRun.objects.count():,} runs, active {active_runs()}; {shares}; "
                f"load {readings.load_average()}")
        stopping.set()
        sampler.join()
        sampler.sample()  # the last figures, at the end of the soak
        soak_seconds = time.monotonic() - started
        for thread in threads:
            thread.join(timeout=600)
        processes.stop("beat")
        stopped = datetime.now(UTC)
        say("scheduler stopped; the worker drains what was queued")
        drained = drain(processes, args.drain_timeout)
    finally:
        stopping.set()
        processes.stop()
    after = database.table_sizes()
    runs = JobRun.objects.count()
    say(f"drained in {drained} s; {runs:,} runs; checking every slot")
    stuck = active_runs()
    statuses = dict(JobRun.objects.values_list("status").annotate(n=Count("id")))
    accounted = slot_accounting(load_started, stopped)
    expected = mix.expected_slots(started_at, accounted["end"])
    created = JobRun.objects.filter(trigger=RunTrigger.SCHEDULE, scheduled_for__gte=started_at,
                                    scheduled_for__lt=accounted["end"]).count()
    counts = mix.describe(args.jobs)
    kinds = {"every minute": Job.objects.filter(enabled=True, crontab__minute="*").count(),
             "hourly": Job.objects.filter(enabled=True, crontab__hour="*").exclude(crontab__minute="*").count()}
    kinds["daily"] = Job.objects.filter(enabled=True).count() - kinds["every minute"] - kinds["hourly"]
    grown = growth(before, after, soak_seconds, runs, kinds)
    report(args, counts, soak_seconds, sampler, threads, drained, stuck, statuses, accounted, expected, created,
           before, after, grown, runs, list(processes.logs.values()))


def report(args, counts, seconds, sampler, threads, drained, stuck, statuses, accounted, expected, created,
           before, after, grown, runs, logs):
    say("")
    print(f"soak: {args.jobs:,} jobs ({counts}), {seconds / 60:.1f} min; load average at the end "
          f"{readings.load_average()} (2 cores, shared)")
    print("")
    rows = []
    for kind in ("beat", "worker parent", "pool children", "PostgreSQL (the soak's database)",
                 "PostgreSQL (all of the server)"):
        cpu = sampler.total.get(kind, 0.0)
        rss = sampler.rss.get(kind)
        rows.append([kind, f"{cpu:.1f}", f"{100 * cpu / seconds:.1f} %", f"{rss[0]:.0f} → {rss[-1]:.0f}" if rss else ""])
    for thread in threads:
        if thread.name.startswith("overview"):
            cpu, pg = thread.cpu()
            walls = [w for w, _, _ in thread.passes]
            rows.append([f"web: {len(walls)} overview requests, {len(thread.errors)} failed "
                         f"(p50 {1000 * statistics.median(walls):.0f} ms, p95 {1000 * readings.pct(walls, 95):.0f} ms)",
                         f"{cpu:.1f} + {pg:.1f} PostgreSQL", f"{100 * (cpu + pg) / seconds:.2f} %", ""])
    markdown(["process", "CPU s", "share of one core", "RSS MB (first → last)"], rows, "lrrr")
    print("")
    rows = []
    for thread in threads:
        if thread.name.startswith("overview"):
            continue
        if not thread.passes:
            rows.append([thread.name, f"{thread.every:g}", "0", "", "", "", thread.errors[:1]])
            continue
        cpu, pg = thread.cpu()
        n = len(thread.passes)
        # A pass rarer than the soak: its CPU per pass over its cadence (its steady-state share).
        share = (cpu + pg) / max(seconds, n * thread.every)
        rows.append([thread.name, f"{thread.every:g}", n, f"{statistics.mean(w for w, _, _ in thread.passes):.2f} "
                     f"({max(w for w, _, _ in thread.passes):.2f})", f"{cpu / n:.3f} + {pg / n:.3f}",
                     f"{100 * share:.2f} %", len(thread.errors)])
    markdown(["pass", "cadence s", "passes", "wall s per pass (max)", "CPU s per pass: Python + PostgreSQL",
              "share of one core (goal ≤ 5 %)", "errors"], rows, "lrrrrrl")
    print("")
    print(f"drain after the scheduler stopped: {drained if drained is None else f'{drained:.0f} s'}; "
          f"runs by status: {statuses}")
    print(f"stuck (pending/queued/running/retrying after the drain): {stuck or 'none'}")
    print(f"slot check over the whole soak (check_recent): {accounted['check_recent']} "
          f"in {accounted['check seconds']:.1f} s")
    print(f"every-minute jobs ({accounted['every minute jobs']:,}), slot by slot (slot_report.build): "
          f"{accounted['every minute']}")
    print(f"scheduled runs created for slots in the soak: {created:,}; slots the enabled jobs had: {expected:,}")
    print("")
    markdown(["size", "before MB", "after MB", "growth per day MB, no retention"],
             [[name, f"{before[name] / 1e6:.1f}", f"{after[name] / 1e6:.1f}", f"{grown['per day'][name] / 1e6:,.0f}"]
              for name in before], "lrrr")
    print(f"{runs:,} runs; {grown['bytes per run']:.0f} bytes per run (runs + attempts tables, indexes included); "
          f"{grown['runs per day']:,} runs per day")
    print(f"with retention ({settings.JOBS_RETENTION_DAYS} days, at least {settings.JOBS_RETENTION_MIN_RUNS} runs "
          f"per job): runs kept at steady state {grown['kept runs']} = "
          f"{sum(grown['kept runs'].values()):,} runs, {grown['plateau bytes'] / 1e9:.1f} GB; reached after "
          f"{grown['days to plateau']} days; growth 0 per day from then on")
    print(f"logs: {', '.join(logs)}")


if __name__ == "__main__":
    main()
