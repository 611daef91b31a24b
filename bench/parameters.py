"""What parameters cost: the scheduler's tick for jobs that declare parameters (their defaults
written on every run) against jobs that declare none, and the runs list filtered on a value
(``GET /api/runs/?job=<id>&param.day=<date>``) against the same list unfiltered.

Tick: --jobs interval jobs all due at once, dispatched in one ``dispatch_due`` batch (runs inserted,
messages published to Redis), --repeat times each, alternating the two kinds of job; the median.

Filter: one job with --runs runs (its ``day`` cycling over 365 dates) beside another job with as many
runs, each query timed --repeat times (the median): the first page (50) of the job's runs, of those
given a common value, and of those given a value no run has (the worst case: every run of the job
read, through run_job_recent_idx, none of the other job's). The plan of the filtered query is printed.

    createdb -h 127.0.0.1 -U postgres scheduler_params_bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_params_bench REDIS_URL=redis://127.0.0.1:6379/1 \\
        .venv/bin/python bench/parameters.py [--jobs 2000] [--runs 200000]
"""

import statistics
import time
from datetime import timedelta

import benchenv
from harness import database
from harness.table import say

REPO = benchenv.setup()

import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django_celery_beat.models import IntervalSchedule  # noqa: E402

from jobs.api.views import with_params  # noqa: E402
from jobs.models import Job, JobRun, ScheduleType  # noqa: E402
from jobs.scheduling.dispatch import dispatch_due  # noqa: E402
from jobs.timing import clock  # noqa: E402

DECLARED = [{"name": "day", "type": "date", "default": "2026-11-01", "required": False, "description": "", "choices": []},
            {"name": "customer", "type": "integer", "default": 42, "required": False, "description": "",
             "choices": []},
            {"name": "region", "type": "choice", "default": "eu", "required": False, "description": "",
             "choices": ["eu", "us"]}]


def reset():
    database.empty(JobRun, Job)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def make_jobs(n, prefix, declared):
    every = IntervalSchedule.objects.get_or_create(every=3600, period=IntervalSchedule.SECONDS)[0]
    Job.objects.bulk_create([Job(name=f"{prefix}-{i}", kind="callable", target="builtin.noop", interval=every,
                                 schedule_type=ScheduleType.INTERVAL, parameters=declared) for i in range(n)],
                            batch_size=2000)
    return Job.objects.filter(name__startswith=f"{prefix}-")


def tick_ms(jobs, n):
    JobRun.objects.filter(job__in=jobs).delete()
    jobs.update(next_run_at=clock.now() - timedelta(seconds=1), last_run=None)
    started = time.perf_counter()
    report = dispatch_due(batch=n)
    elapsed = (time.perf_counter() - started) * 1000
    assert report.runs_created == n, report
    return elapsed


def bench_tick(n, repeat):
    reset()
    kinds = {"no parameters (baseline)": make_jobs(n, "plain", []), "3 parameters with defaults": make_jobs(n, "p", DECLARED)}
    times = {label: [] for label in kinds}
    for _ in range(repeat):
        for label, jobs in kinds.items():
            times[label].append(tick_ms(jobs, n))
    sample = JobRun.objects.filter(job__name__startswith="p-").first()
    assert sample.params == {"day": "2026-11-01", "customer": 42, "region": "eu"}, sample.params
    return {label: statistics.median(values) for label, values in times.items()}


def seed_runs(job, count):
    now = clock.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {JobRun._meta.db_table} (job_id, status, trigger, scheduled_for, attempt, max_attempts,
                created_at, finished_at, publish_count, worker, output, output_bytes, error, reason, lost_attempts,
                params)
            SELECT %s, 'succeeded', 'manual', %s - make_interval(secs => g), 1, 1, %s - make_interval(secs => g),
                   %s - make_interval(secs => g), 1, 'w', '', 0, '', '', 0,
                   jsonb_build_object('day', to_char(date '2026-01-01' + (g %% 365), 'YYYY-MM-DD'),
                                      'customer', g %% 1000, 'region', 'eu')
            FROM generate_series(1, %s) AS g""", [job.pk, now, now, now, count])
    cursor.close()


def median_ms(query, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        list(query())
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def bench_filter(count, repeat):
    reset()
    staff = User.objects.filter(username="bench-staff").first() or User.objects.create_user("bench-staff", is_staff=True)
    jobs = [Job.objects.create(name=name, kind="callable", target="builtin.noop", parameters=DECLARED)
            for name in ("report", "other")]
    for job in jobs:
        with transaction.atomic():
            seed_runs(job, count)
    database.analyze(JobRun._meta.db_table)
    job = jobs[0]
    base = JobRun.objects.filter(job_id=job.pk).defer("output", "result").order_by("-created_at", "-id")

    def page(wanted):
        return lambda: (with_params(base, staff, {"job": str(job.pk)}, wanted) if wanted else base)[:50]

    rows = {
        "first page, unfiltered (baseline)": median_ms(page({}), repeat),
        "first page, param.day=2026-06-01 (1 run in 365)": median_ms(page({"day": "2026-06-01"}), repeat),
        "first page, param.region=eu (every run)": median_ms(page({"region": "eu"}), repeat),
        "param.day=2030-01-01 (no run: every run of the job read)": median_ms(page({"day": "2030-01-01"}), repeat),
    }
    return rows, database.explain(page({"day": "2026-06-01"})())["Plan"]


def indexes_of(node):
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= indexes_of(child)
    return found


def main():
    args = benchenv.arguments(__doc__, jobs=2000, runs=200000, repeat=5)
    database.migrate()

    say(f"\nTick: {args.jobs} due jobs in one batch (median of {args.repeat})")
    say(f"{'jobs':<34} {'ms per tick':>12} {'µs per job':>11}")
    for label, ms in bench_tick(args.jobs, args.repeat).items():
        say(f"{label:<34} {ms:>12.1f} {ms * 1000 / args.jobs:>11.1f}")

    say(f"\nRuns list of one job with {args.runs} runs, beside another with as many (median of {args.repeat})")
    rows, plan = bench_filter(args.runs, args.repeat)
    say(f"{'query':<58} {'ms':>8}")
    for label, ms in rows.items():
        say(f"{label:<58} {ms:>8.2f}")
    say(f"\nplan of the filtered query: {plan['Node Type']}, indexes {sorted(indexes_of(plan))}, "
        f"rows read {plan.get('Actual Rows')} returned, shared buffers hit {plan.get('Shared Hit Blocks')}")
    reset()


if __name__ == "__main__":
    main()
