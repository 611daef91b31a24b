"""What counting a job's failures in a row (auto-pause, jobs.lifecycle.streaks) costs each run's end,
against the same ends without it, in one invocation.

For each round: N runs are created and claimed, then ended by the lifecycle as a worker ends them
(``record_success``: on PostgreSQL the single statement; ``record_failure``: the ORM's transaction),
once with the streak counted (as shipped) and once with it taken out (``streaks.count_end`` a no-op
and the success statement without its reset), alternating, and the ends per second compared. The
job has ``pause_after_failures`` off, so no failure pauses it (the count is kept all the same).

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_bench_ends"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_ends REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/run_ends.py --runs 2000 --rounds 3

Needs a database it may fill (it migrates it; each invocation makes a job of its own).
"""

import contextlib
import statistics
import time

import benchenv
from harness import database

benchenv.setup(JOBS_RETENTION_INTERVAL_SECONDS="0")


from jobs import lifecycle  # noqa: E402
from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.lifecycle import postgres, streaks  # noqa: E402
from jobs.models import Job, RunStatus, RunTrigger  # noqa: E402


@contextlib.contextmanager
def without_streak():
    """The lifecycle as it was before auto-pause: no count where runs end."""
    count_end, succeed_sql = streaks.count_end, postgres.SUCCEED_SQL
    start, end = succeed_sql.index("), streak AS ("), succeed_sql.index("), ended AS (")
    streaks.count_end = lambda run, status: None
    postgres.SUCCEED_SQL = succeed_sql[:start] + succeed_sql[end:]
    postgres._succeed_sql.cache_clear()
    try:
        yield
    finally:
        streaks.count_end, postgres.SUCCEED_SQL = count_end, succeed_sql
        postgres._succeed_sql.cache_clear()


def claimed_runs(job, count):
    runs = [lifecycle.create_run(job, trigger=RunTrigger.MANUAL) for _ in range(count)]
    for run in runs:
        assert lifecycle.claim(run.pk, 1, "bench@host", 1) is not None
    return [run.pk for run in runs]


def ends_per_second(job, count, end):
    ids = claimed_runs(job, count)
    started = time.perf_counter()
    for run_id in ids:
        end(run_id)
    return count / (time.perf_counter() - started)


def succeed(run_id):
    assert lifecycle.record_success(run_id, 1, "", 0, None)


def fail(run_id):
    assert lifecycle.record_failure(run_id, 1, "bench") == RunStatus.FAILED


def main():
    args = benchenv.arguments(__doc__, runs=2000, rounds=3)
    database.migrate()
    job = save_job(Job(name=f"bench-run-ends-{time.time_ns()}", kind="callable", target="builtin.noop", max_retries=0),
                   {"type": "manual"})
    ends_per_second(job, min(args.runs, 100), succeed)  # warm up: connections, prepared statements
    ends_per_second(job, min(args.runs, 100), fail)
    rates = {}
    for round_number in range(args.rounds):
        variants = ["with the streak", "without"][::1 if round_number % 2 == 0 else -1]  # each goes first in turn
        for label, end in (("success", succeed), ("failure", fail)):
            for variant in variants:
                with contextlib.nullcontext() if variant == "with the streak" else without_streak():
                    rates.setdefault((label, variant), []).append(ends_per_second(job, args.runs, end))
    print(f"\n{args.runs} ends per round, {args.rounds} rounds, median ends per second")
    print(f"{'end':<10}{'with the streak':>18}{'without':>12}{'cost':>10}")
    for label in ("success", "failure"):
        with_it, without = (statistics.median(rates[(label, v)]) for v in ("with the streak", "without"))
        print(f"{label:<10}{with_it:>18.0f}{without:>12.0f}{(without / with_it - 1) * 100:>9.1f}%")


if __name__ == "__main__":
    main()
