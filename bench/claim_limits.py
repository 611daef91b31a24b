"""The claim and the recorded success of a run, in this process, one after the other: for a job
without a limit (the single-statement claim, which the limits' gate must leave as it was), and,
in the same invocation, for a job that names a limit with room (the claim that locks the limit's
row and counts its running runs), with and without a rate limit. No broker, no worker: the
database round trips of the claim path only (the runs' messages are not published).

    psql -h 127.0.0.1 -U postgres -c "create database scheduler_bench9"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench9 .venv/bin/python bench/claim_limits.py --runs 2000

Run on a tree without limits (before them) it measures the first line only: compare the two.
"""

import time
from datetime import timedelta

import benchenv
from harness import database
from harness.readings import pct

benchenv.setup(JOBS_RETENTION_INTERVAL_SECONDS="0")

from django.utils import timezone  # noqa: E402

from jobs import lifecycle  # noqa: E402
from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.lifecycle.runs import create_runs  # noqa: E402
from jobs.models import Job, JobRun, RunStatus  # noqa: E402

try:
    from jobs.models import Limit
except ImportError:  # a tree from before limits
    Limit = None


def reset():
    database.empty()


def timed_claims(job, runs):
    """Seconds of each claim + success of ``runs`` new queued runs of ``job``."""
    now = timezone.now()
    rows = [(job, now + timedelta(microseconds=i), RunStatus.QUEUED, "", None) for i in range(runs)]
    ids = sorted(run_id for run_id, *_ in create_runs(rows, now))
    took = []
    for run_id in ids:
        started = time.perf_counter()
        run = lifecycle.claim(run_id, 1, "bench@host", 1)
        lifecycle.record_success(run_id, 1)
        took.append(time.perf_counter() - started)
        assert run is not None
    assert JobRun.objects.filter(pk__in=ids, status=RunStatus.SUCCEEDED).count() == runs
    return sorted(took)


def main():
    args = benchenv.arguments(__doc__, runs=2000)
    database.migrate()
    reset()
    cases = {"no limit (the one-statement claim)": {}}
    if Limit is not None:
        Limit.objects.create(key="bench", max_running=1000)
        Limit.objects.create(key="bench-rate", max_running=1000, max_starts_per_minute=10_000)
        cases["limit_key, room free"] = {"limit_key": "bench"}
        cases["limit_key, with a rate limit"] = {"limit_key": "bench-rate"}
    results = {}
    for n, (name, fields) in enumerate(cases.items()):
        job = save_job(Job(name=f"bench-{n}", kind="callable", target="builtin.noop", **fields), {"type": "manual"})
        timed_claims(job, 50)  # warm: connection, prepared statements
        results[name] = timed_claims(job, args.runs)
    print(f"{'claim + success of one run':<40} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name, values in results.items():
        print(f"{name:<40} {len(values):>6} {pct(values, 50) * 1000:>8.2f} {pct(values, 95) * 1000:>8.2f} "
              f"{pct(values, 99) * 1000:>8.2f}")
    reset()


if __name__ == "__main__":
    main()
