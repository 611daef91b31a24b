"""Server time of the built-in pages over 10,000 jobs and 1,000,000 (or 10,000,000) runs, each page
as a ratio to the stock admin's run list measured in the same invocation.

Seeds the database once (reruns find the data and skip it): jobs through the ORM, runs and attempts
with INSERT ... SELECT generate_series, then the pages' figures counted from those runs
(``lifecycle.recount_ends``). Runs come at the same rate whatever their number (one every 2.6 s,
30 days per million), so ten times the runs is ten times the history. Then requests each page
in-process with Django's test Client, as staff and as a non-staff owner of 100 jobs (among them
the job holding a tenth of the runs): 5 warm-up requests, then 50 timed ones. Prints p50/p95/max,
the number of SQL queries, how many times faster than the admin changelist, and EXPLAIN (ANALYZE,
BUFFERS) of each page's slowest query.

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_pages"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_pages REDIS_URL=redis://127.0.0.1:6379/4 \
        SECRET_KEY=x .venv/bin/python bench/pages.py --save /tmp/pages-1m.json
    psql -h 127.0.0.1 -U postgres -c "create database scheduler_pages10m"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_pages10m REDIS_URL=redis://127.0.0.1:6379/4 \
        SECRET_KEY=x .venv/bin/python bench/pages.py --runs 10000000 --against /tmp/pages-1m.json

Needs a database it may fill (it migrates it); one database per number of runs.
"""

import gc
import json
import random
import statistics
import time
from datetime import timedelta

import benchenv
from harness import database
from harness.readings import pct
from harness.table import markdown, ratio, say

REPO = benchenv.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_celery_beat.models import CrontabSchedule, IntervalSchedule  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.definitions.jobs import apply_schedule  # noqa: E402
from jobs.models import Job, JobRun, ScheduleType  # noqa: E402
from jobs.pages.keyset import position  # noqa: E402

JOBS = 10_000
RUNS = 1_000_000
OWNED_JOBS = 100
HEAVY_SHARE = 10  # one run in HEAVY_SHARE belongs to the first job: the "job with many runs"
SECONDS_PER_RUN = 30 * 86400 / 1_000_000  # 30 days of history per million runs
WARMUP = 5
TIMED = 50
# The admin changelists (the baseline) take seconds a request at 10,000,000 runs: fewer requests.
ADMIN_WARMUP = 1
ADMIN_TIMED = 10
TARGET_MS = 100
TARGET_FASTER = 15  # times faster than the admin changelist
BASELINE = ("admin run changelist", "staff")


# --- seeding


def seed_users():
    User = get_user_model()
    staff, _ = User.objects.get_or_create(username="bench-staff", defaults={"is_staff": True, "is_superuser": True})
    owner, _ = User.objects.get_or_create(username="bench-owner")
    return staff, owner


def seed_jobs(owner, jobs_wanted):
    if Job.objects.count() >= jobs_wanted:
        say(f"jobs: {Job.objects.count()} already there")
        return
    rng = random.Random(1)
    now = timezone.now()
    interval, _ = IntervalSchedule.objects.get_or_create(every=300, period=IntervalSchedule.SECONDS)
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute="*/15", hour="*", day_of_month="*", month_of_year="*", day_of_week="*", timezone="UTC")
    specs = [{"type": "interval", "every_seconds": 60}, {"type": "interval", "every_seconds": 3600},
             {"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
             {"type": "cron", "cron": "30 */2 * * 1-5", "timezone": "America/New_York"}]
    kinds = [("callable", "jobs.builtin.noop"), ("command", "echo hello"), ("http", "http://127.0.0.1:9/ping")]
    jobs = []
    for i in range(jobs_wanted):
        kind, target = kinds[i % len(kinds)]
        job = Job(name=f"bench-job-{i:05d}", kind=kind, target=target, owner=owner if i < OWNED_JOBS else None,
                  tags=["bench", f"team-{i % 20}"], sla_seconds=60 if i % 7 == 0 else None)
        if i < 20:
            apply_schedule(job, specs[i % len(specs)])
        elif i % 2:
            job.schedule_type, job.interval = ScheduleType.INTERVAL, interval
            job.next_run_at = now + timedelta(seconds=rng.uniform(0, 300))
        else:
            job.schedule_type, job.crontab = ScheduleType.CRON, crontab
            job.next_run_at = now + timedelta(seconds=rng.uniform(0, 900))
        job.enabled = i % 50 != 0
        jobs.append(job)
    Job.objects.bulk_create(jobs, batch_size=2000)
    say(f"jobs: {jobs_wanted} created")


RUNS_SQL = """
INSERT INTO jobs_jobrun (job_id, status, trigger, scheduled_for, attempt, max_attempts, created_at, queued_at,
    started_at, finished_at, heartbeat_at, next_attempt_at, publish_count, worker, output, output_bytes, result,
    error, reason, triggered_by_id, lost_attempts)
SELECT job_id, status, trigger, slot, 1, 1, slot, slot + interval '50 ms',
    CASE WHEN status IN ('skipped', 'queued') THEN NULL ELSE slot + interval '200 ms' END,
    CASE WHEN status IN ('skipped', 'queued', 'running') THEN NULL
         ELSE slot + interval '200 ms' + make_interval(secs => took) END,
    CASE WHEN status = 'running' THEN now() ELSE NULL END,
    NULL, CASE WHEN status = 'skipped' THEN 0 ELSE 1 END,
    CASE WHEN status = 'skipped' THEN '' ELSE 'celery@bench-' || (g %% 4) END,
    CASE WHEN status = 'succeeded' THEN 'done' ELSE '' END, 4, NULL,
    CASE WHEN status = 'failed' THEN 'RuntimeError: boom'
         WHEN status = 'timed_out' THEN 'Timed out after 3600 s' ELSE '' END,
    CASE WHEN status = 'skipped' THEN 'missed: start deadline passed' ELSE '' END, NULL, 0
FROM (
    SELECT g,
        CASE WHEN g %% %(heavy)s = 0 THEN %(first)s ELSE %(first)s + 1 + (g * 7919) %% (%(jobs)s - 1) END AS job_id,
        CASE WHEN g <= 150 THEN 'running' WHEN g <= 300 THEN 'queued'
             WHEN (g * 104729) %% 1000 < 900 THEN 'succeeded' WHEN (g * 104729) %% 1000 < 950 THEN 'failed'
             WHEN (g * 104729) %% 1000 < 970 THEN 'timed_out' ELSE 'skipped' END AS status,
        CASE WHEN g %% 100 = 0 THEN 'manual' ELSE 'schedule' END AS trigger,
        now() - make_interval(secs => g * %(spacing)s) AS slot,
        1 + (g * 31) %% 120 AS took
    FROM generate_series(1::bigint, %(runs)s) AS g
) AS r
"""

ATTEMPTS_SQL = """
INSERT INTO jobs_jobattempt (run_id, number, outcome, task_id, worker, pid, started_at, finished_at, heartbeat_at,
    error, traceback)
SELECT id, 1, CASE status WHEN 'running' THEN 'running' ELSE status END, 'run-' || id || '-1', worker, 4242,
    started_at, finished_at, heartbeat_at, error, ''
FROM jobs_jobrun WHERE started_at IS NOT NULL
"""

LAST_RUN_SQL = """
UPDATE jobs_job AS j SET last_run_id = r.id
FROM (SELECT DISTINCT ON (job_id) job_id, id FROM jobs_jobrun ORDER BY job_id, created_at DESC, id DESC) AS r
WHERE r.job_id = j.id
"""


def seed_runs(runs_wanted, jobs_wanted):
    if JobRun.objects.count() >= runs_wanted:
        say(f"runs: {JobRun.objects.count()} already there")
        return
    first = Job.objects.order_by("pk").values_list("pk", flat=True).first()
    started = time.monotonic()
    count = database.execute(RUNS_SQL, {"heavy": HEAVY_SHARE, "first": first, "jobs": jobs_wanted, "runs": runs_wanted,
                               "spacing": SECONDS_PER_RUN})
    say(f"runs: {count} inserted in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    count = database.execute(ATTEMPTS_SQL)
    say(f"attempts: {count} inserted in {time.monotonic() - started:.0f} s")
    count = database.execute(LAST_RUN_SQL)
    say(f"jobs: last_run set on {count}")
    started = time.monotonic()
    count = lifecycle.recount_ends()
    say(f"the pages' figures: {count} ends counted in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    # VACUUM as autovacuum soon would: it sets the visibility map that index-only scans need.
    from django.apps import apps

    for model in ("Job", "JobRun", "JobAttempt", "JobHourCounts", "HourCounts", "RecentRuns", "JobDayFigures",
                  "JobDayCounts"):  # the day counts' model as the commit under test names it
        if model in {m.__name__ for m in apps.get_app_config("jobs").get_models()}:
            database.execute(f"VACUUM ANALYZE {apps.get_model('jobs', model)._meta.db_table}")
    say(f"vacuumed and analyzed in {time.monotonic() - started:.0f} s")


# --- measuring


def measure(client, url, warmup=WARMUP, timed=TIMED):
    """(timings in ms, captured queries of one more request)."""
    for _ in range(warmup):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(timed):
        started = time.perf_counter()
        client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return timings, captured.captured_queries


def explain(sql):
    """(top plan line, index names used, whether jobs_jobrun is read by Seq Scan)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        lines = [row[0] for row in cursor.fetchall()]
    indexes = sorted({line.split(" using ")[1].split()[0] for line in lines if " using " in line}
                     | {line.split("Bitmap Index Scan on ")[1].split()[0] for line in lines
                        if "Bitmap Index Scan on " in line})
    seq_run = any("Seq Scan on jobs_jobrun" in line for line in lines)
    timing = [line.strip() for line in lines if line.startswith("Execution Time")]
    return lines[0].strip(), indexes, seq_run, timing[0] if timing else "", lines


def pages(heavy_job, run_id, deep):
    """(name, user, url) of each page measured; the admin changelists are the baseline."""
    return [
        ("overview", "staff", "/"),
        ("overview", "owner", "/"),
        ("jobs list", "staff", "/jobs/"),
        ("jobs list ?kind=http&status=failed", "staff", "/jobs/?kind=http&status=failed"),
        ("jobs list", "owner", "/jobs/"),
        ("job detail (heavy job)", "staff", f"/jobs/{heavy_job}/"),
        ("job detail (heavy job)", "owner", f"/jobs/{heavy_job}/"),
        ("job detail (heavy job) ?status=failed", "owner", f"/jobs/{heavy_job}/?status=failed"),
        ("runs list", "staff", "/runs/"),
        ("runs list ?status=failed", "staff", "/runs/?status=failed"),
        ("runs list, half the history back", "staff", f"/runs/?older={deep}"),
        ("runs list", "owner", "/runs/"),
        ("runs list ?status=failed", "owner", "/runs/?status=failed"),
        ("runs list, half the history back", "owner", f"/runs/?older={deep}"),
        ("job on-time report, 30 days (heavy job)", "owner", f"/jobs/{heavy_job}/report/?days=30"),
        ("job on-time report, 90 days (heavy job)", "staff", f"/jobs/{heavy_job}/report/?days=90"),
        ("job on-time report API, 90 days (heavy job)", "staff", f"/api/jobs/{heavy_job}/report/?days=90"),
        ("run detail", "staff", f"/runs/{run_id}/"),
        ("run detail", "owner", f"/runs/{run_id}/"),
        ("admin run changelist", "staff", "/admin/jobs/jobrun/"),
        ("admin run changelist ?status=failed", "staff", "/admin/jobs/jobrun/?status__exact=failed"),
    ]


def main():
    parser = benchenv.parser(__doc__, runs=(RUNS, f"runs to seed (default {RUNS:,})"),
                             jobs=(JOBS, f"jobs to seed (default {JOBS:,})"),
                             only=(None, "measure only the pages whose name contains this"),
                             plans=(False, "print the whole plan of each slowest query"),
                             seed_only=(False, "seed the database, measure nothing"))
    parser.add_argument("--save", metavar="PATH", help="write the figures as JSON, for --against")
    parser.add_argument("--gc", choices=("frozen", "on", "off"), default="frozen",
                        help="Python's garbage collector: 'frozen' as in the web server (scheduler_site/wsgi.py "
                             "freezes what is loaded at start), 'on' without the freeze, 'off' to tell its pauses "
                             "from the page's work (default: frozen)")
    parser.add_argument("--against", metavar="PATH", help="print each page's p95 as a ratio to a saved invocation's")
    args = parser.parse_args()

    database.migrate()
    staff, owner = seed_users()
    seed_jobs(owner, args.jobs)
    seed_runs(args.runs, args.jobs)
    if args.seed_only:
        return

    heavy_job = Job.objects.order_by("pk").values_list("pk", flat=True).first()
    run_id = JobRun.objects.filter(job_id=heavy_job, status="failed").order_by("-created_at").values_list(
        "pk", flat=True)[5]
    middle = timezone.now() - timedelta(seconds=args.runs * SECONDS_PER_RUN / 2)
    deep = position(JobRun.objects.filter(created_at__lte=middle).order_by("-created_at", "-id").first())
    clients = {}
    for name, user in (("staff", staff), ("owner", owner)):
        # SERVER_NAME: a host ALLOWED_HOSTS accepts, without setup_test_environment's template signals.
        clients[name] = Client(SERVER_NAME="localhost")
        clients[name].force_login(user)

    if args.gc == "frozen":
        import scheduler_site.wsgi  # noqa: F401 -- as a web worker starts: gc.freeze() once loaded
    elif args.gc == "off":
        gc.disable()
    rows, slow = [], []
    for name, who, url in pages(heavy_job, run_id, deep):
        if args.only and args.only not in name and (name, who) != BASELINE:
            continue
        timings, queries = (measure(clients[who], url, ADMIN_WARMUP, ADMIN_TIMED) if name.startswith("admin")
                            else measure(clients[who], url))
        p50, p95, top = statistics.median(timings), pct(timings, 95), max(timings)
        rows.append({"page": name, "user": who, "p50": p50, "p95": p95, "max": top, "queries": len(queries)})
        say(f"  {name} [{who}]: p95 {p95:.1f} ms, {len(queries)} queries")
        selects = [q for q in queries if q["sql"].lstrip().upper().startswith("SELECT")]
        if selects:
            slowest = max(selects, key=lambda q: float(q["time"]))
            slow.append((name, who, slowest))

    baseline = next(row["p95"] for row in rows if (row["page"], row["user"]) == BASELINE)
    earlier = {}
    if args.against:
        with open(args.against) as f:
            saved = json.load(f)
        earlier = {(row["page"], row["user"]): row["p95"] for row in saved["rows"]}
    runs, jobs = JobRun.objects.count(), Job.objects.count()
    say("")
    say(f"{runs:,} runs, {jobs:,} jobs; {WARMUP} warm-up + {TIMED} timed requests per page ({ADMIN_WARMUP} + "
        f"{ADMIN_TIMED} for the admin's), in-process test Client, garbage collector {args.gc}")
    say("")
    header = ["page", "user", "p50 ms", "p95 ms", "max ms", "SQL queries", "× faster than the admin",
              f"p95 ≤ {TARGET_MS} ms", f"≥ {TARGET_FASTER}× faster"]
    header += [f"p95 ÷ {args.against}'s", "≤ 1.5×"] if earlier else []
    cells = []
    for row in rows:
        faster = baseline / row["p95"]
        page = f"*{row['page']} (baseline)*" if row["page"].startswith("admin") else row["page"]
        line = [page, row["user"], f"{row['p50']:.1f}", f"{row['p95']:.1f}", f"{row['max']:.1f}", row["queries"],
                ratio(baseline, row["p95"], "{:.1f}"), "yes" if row["p95"] <= TARGET_MS else "NO",
                "yes" if faster >= TARGET_FASTER else "NO"]
        if earlier:
            before = earlier.get((row["page"], row["user"]))
            line += [ratio(row["p95"], before), "yes" if before and row["p95"] <= 1.5 * before else "NO"]
        cells.append(line)
    markdown(header, cells, "llrrrrrll" + ("rl" if earlier else ""))
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"runs": runs, "jobs": jobs, "rows": rows}, f, indent=1)
        say(f"\nsaved to {args.save}")

    say("")
    say("Slowest query of each page, EXPLAIN (ANALYZE, BUFFERS):")
    for name, who, query in slow:
        top_line, indexes, seq_run, timing, lines = explain(query["sql"])
        flag = "  <-- Seq Scan on jobs_jobrun" if seq_run else ""
        say(f"- {name} [{who}] ({float(query['time']) * 1000:.1f} ms captured): {query['sql'][:160]}")
        say(f"    {top_line}")
        say(f"    {timing}; indexes: {', '.join(indexes) or 'none'}{flag}")
        if args.plans:
            for line in lines:
                say(f"      {line}")


if __name__ == "__main__":
    main()
