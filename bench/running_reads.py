"""What a backlog of queued runs costs the queries that look for running runs (the monitor's lost and
overdue checks, the overview's running list), against the same queries with no backlog, in one
invocation.

Queued and running runs share one phase in run_active_idx (jobs/models/run.py: a claim then writes no
index), so these queries read the queued runs too. Makes one job with ``--running`` running runs and
``--history`` succeeded ones, measures, then adds ``--queued`` queued runs and measures again:
EXPLAIN (ANALYZE, BUFFERS) of each query, its execution time and the buffers it read.

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_bench_running"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_running REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/running_reads.py --queued 100000

Needs a database it may fill (it migrates it and empties the runs and jobs).
"""

from datetime import timedelta

import benchenv
from harness import database

benchenv.setup()

from django.utils import timezone  # noqa: E402

from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.models import Job, JobRun, RunStatus  # noqa: E402


def add_runs(job, status, count, first):
    now = timezone.now()
    JobRun.objects.bulk_create([
        JobRun(job=job, status=status, scheduled_for=now + timedelta(microseconds=first + i), queued_at=now,
               heartbeat_at=now, started_at=None if status == RunStatus.QUEUED else now,
               finished_at=now if status == RunStatus.SUCCEEDED else None)
        for i in range(count)], batch_size=10_000)
    database.execute("VACUUM ANALYZE jobs_jobrun")


def queries():
    now = timezone.now()
    running = JobRun.objects.filter(status=RunStatus.RUNNING)
    return {
        "monitor: lost": running.filter(heartbeat_at__lt=now - timedelta(minutes=1))
        .only("pk", "attempt", "worker", "heartbeat_at"),
        "monitor: overdue": running.select_related("job").only("pk", "attempt", "started_at", "job__timeout_seconds"),
        "overview: running": running.select_related("job").only("status", "started_at", "job__name")
        .order_by("started_at")[:50],
    }


def measure():
    found = {}
    for name, queryset in queries().items():
        plan = database.explain(queryset)
        buffers = plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0)
        found[name] = (plan["Execution Time"], buffers)
    return found


def main():
    args = benchenv.arguments(__doc__, queued=100_000, running=100, history=(200_000, "succeeded runs"))
    database.migrate()
    database.empty()
    job = save_job(Job(name="bench-running-reads", kind="callable", target="builtin.noop"), {"type": "manual"})
    add_runs(job, RunStatus.RUNNING, args.running, 0)
    add_runs(job, RunStatus.SUCCEEDED, args.history, args.running)
    without = measure()
    add_runs(job, RunStatus.QUEUED, args.queued, args.running + args.history)
    backlog = measure()
    print(f"\n{args.running:,} running, {args.history:,} succeeded; then {args.queued:,} queued as well")
    print(f"{'query':<22}{'no backlog ms':>15}{'buffers':>9}{'backlog ms':>12}{'buffers':>9}")
    for name in without:
        (ms0, b0), (ms1, b1) = without[name], backlog[name]
        print(f"{name:<22}{ms0:>15.2f}{b0:>9}{ms1:>12.2f}{b1:>9}")


if __name__ == "__main__":
    main()
