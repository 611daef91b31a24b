"""Retention under load: prune 1,000,000 runs to 10 % while workers keep writing runs.

Seeds --jobs jobs with --runs-per-job runs each (default 1,000 × 1,000), their ages spread evenly
over 100 days, 5 % failed, one old run per job still ``running`` (it must survive), one attempt
per run. Then two writer threads do what a worker does, through the same functions (a run row,
``lifecycle.claim``, ``lifecycle.record_success``), about 50 runs per second each, on the same jobs, while
the retention pass (``jobs.retention.prune``, JOBS_RETENTION_DAYS=10) deletes what is older than
10 days. Every writer call is timed. Baseline, with --baseline (a second seed): the same cut as
one ``DELETE`` statement, as a hand-written cleanup would do it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench9 REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/retention.py [--baseline]
"""

import os
import random
import threading
import time
from datetime import timedelta

import benchenv
from harness import database
from harness.readings import pct
from harness.table import say

REPO = benchenv.setup(JOBS_RETENTION_DAYS="10", JOBS_RETENTION_MIN_RUNS="10")

import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.models import TERMINAL_STATUSES, Job, JobRun, RunStatus, RunTrigger  # noqa: E402
from jobs.operations import retention  # noqa: E402

DAYS = 100
TERMINAL = sorted(str(s) for s in TERMINAL_STATUSES)


def reset():
    database.empty()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def seed(jobs, per_job):
    reset()
    t0 = time.monotonic()
    Job.objects.bulk_create([Job(name=f"ret-{i}", kind="callable", target="builtin.noop") for i in range(jobs)],
                            batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO jobs_jobrun (job_id, status, trigger, scheduled_for, attempt, max_attempts, created_at,
                                     queued_at, started_at, finished_at, heartbeat_at, publish_count, worker,
                                     output, output_bytes, error, reason, lost_attempts)
            SELECT j.id, CASE WHEN g = %(half)s THEN 'running' WHEN g %% 20 = 0 THEN 'failed' ELSE 'succeeded' END,
                   'schedule', t, 1, 1, t, t, t, CASE WHEN g = %(half)s THEN NULL ELSE t + interval '1 second' END,
                   t, 1, 'w@host', 'some output', 11, '', '', 0
            FROM jobs_job j, LATERAL (
                SELECT g, now() - g * (interval '1 day' * %(days)s / %(n)s) AS t FROM generate_series(1, %(n)s) g
            ) s""", {"n": per_job, "half": per_job // 2, "days": DAYS})
        say(f"  {jobs * per_job:,} runs in {time.monotonic() - t0:.0f} s")
        cursor.execute("""
            INSERT INTO jobs_jobattempt (run_id, number, outcome, task_id, worker, pid, started_at, finished_at,
                                         heartbeat_at, error, traceback)
            SELECT id, 1, status, 'run-' || id || '-1', worker, 1, started_at, finished_at, heartbeat_at, '', ''
            FROM jobs_jobrun""")
        cursor.execute("""
            UPDATE jobs_job j SET last_run_id = (SELECT max(id) FROM jobs_jobrun r WHERE r.job_id = j.id)""")
        cursor.execute("VACUUM ANALYZE jobs_jobrun")
        cursor.execute("VACUUM ANALYZE jobs_jobattempt")
    say(f"  seeded with attempts in {time.monotonic() - t0:.0f} s")


class Writer(threading.Thread):
    """What a worker writes for each run, timed call by call."""

    def __init__(self, index, job_ids, stop):
        super().__init__(daemon=True)
        self.index, self.job_ids, self.stop = index, job_ids, stop
        self.latencies = []
        self.errors = 0

    def run(self):
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                job = Job(pk=random.choice(self.job_ids))
                now = timezone.now()
                try:
                    t = time.monotonic()
                    run = JobRun.objects.create(job=job, trigger=RunTrigger.MANUAL, status=RunStatus.QUEUED,
                                                scheduled_for=now + timedelta(microseconds=self.index), queued_at=now)
                    self.latencies.append(time.monotonic() - t)
                    t = time.monotonic()
                    lifecycle.claim(run.pk, 1, worker=f"writer{self.index}", pid=os.getpid())
                    self.latencies.append(time.monotonic() - t)
                    t = time.monotonic()
                    lifecycle.record_success(run.pk, 1)
                    self.latencies.append(time.monotonic() - t)
                except Exception as exc:
                    self.errors += 1
                    say(f"  writer {self.index}: {exc}")
                time.sleep(0.02)
        finally:
            connection.close()


def measure(label, job_ids, prune):
    before = JobRun.objects.count()
    stop = threading.Event()
    writers = [Writer(i, job_ids, stop) for i in range(2)]
    for w in writers:
        w.start()
    time.sleep(2)
    say(f"{label}: pruning {before:,} runs while 2 writers write")
    t0 = time.monotonic()
    detail = prune()
    seconds = time.monotonic() - t0
    time.sleep(2)
    stop.set()
    for w in writers:
        w.join()
    lat = sorted(x for w in writers for x in w.latencies)
    after = JobRun.objects.count()
    unfinished = JobRun.objects.exclude(status__in=TERMINAL_STATUSES).count()
    return {"label": label, "before": before, "after": after, "seconds": seconds, "writes": len(lat),
            "errors": sum(w.errors for w in writers), "p50": pct(lat, 50), "p99": pct(lat, 99),
            "max": lat[-1] if lat else float("nan"), "over_1s": sum(1 for x in lat if x > 1.0),
            "unfinished": unfinished, "detail": detail}


def ours():
    report = retention.prune()
    return f"{report.batches} batches of {settings.JOBS_RETENTION_BATCH}, {report.skipped_batches} skipped"


def one_statement():
    cutoff = timezone.now() - timedelta(days=settings.JOBS_RETENTION_DAYS)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET last_run_id = NULL WHERE last_run_id IN (SELECT id FROM jobs_jobrun "
                       "WHERE created_at < %s AND status = ANY(%s))", [cutoff, TERMINAL])
        cursor.execute("DELETE FROM jobs_jobattempt WHERE run_id IN (SELECT id FROM jobs_jobrun "
                       "WHERE created_at < %s AND status = ANY(%s))", [cutoff, TERMINAL])
        cursor.execute("DELETE FROM jobs_jobrun WHERE created_at < %s AND status = ANY(%s)",
                       [cutoff, TERMINAL])
    return "one transaction"


def main():
    args = benchenv.arguments(__doc__, jobs=1000, runs_per_job=1000,
                              baseline=(False, "also the one-statement DELETE, on a new seed"))
    database.migrate()
    results = []
    for label, prune in [("ours", ours)] + ([("one DELETE", one_statement)] if args.baseline else []):
        say(f"{label}: seeding {args.jobs:,} jobs × {args.runs_per_job:,} runs over {DAYS} days")
        seed(args.jobs, args.runs_per_job)
        job_ids = list(Job.objects.values_list("pk", flat=True))
        results.append(measure(label, job_ids, prune))
    say("")
    say(f"{'pass':<11} {'runs before':>11} {'after':>9} {'seconds':>8} {'writes':>7} {'errors':>6} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} {'>1 s':>5} {'unfinished kept':>15}  detail")
    for r in results:
        say(f"{r['label']:<11} {r['before']:>11,} {r['after']:>9,} {r['seconds']:>8.1f} {r['writes']:>7,} "
            f"{r['errors']:>6} {r['p50'] * 1000:>7.1f} {r['p99'] * 1000:>7.1f} {r['max'] * 1000:>8.1f} "
            f"{r['over_1s']:>5} {r['unfinished']:>15,}  {r['detail']}")
    reset()


if __name__ == "__main__":
    main()
