"""What run now's quota checks cost (``jobs.actions.quotas.runs_refusal``): the user's runs started in
the last hour, their runs in flight, and their team's two counts, on a database of --runs runs.

The database is filled with --jobs jobs of 50 users of one team (which has every team quota set, so
every count is made), and --runs runs over 30 days: most scheduled, one in ten started by a person
(the measured user's among them, --recent in the last hour), --active of them not ended. Then the
check is made --calls times, inside a transaction as run now makes it; the figures are the
time of one check (its statements included) with the user's quotas alone and with a team's, and
the plans of the statements.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench_quotas .venv/bin/python bench/quota_checks.py

Needs a database it may fill (it migrates it and empties its jobs and runs).
"""

import os
import random
import statistics
import time
from datetime import timedelta

import benchenv
from harness import database

benchenv.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from audit.models import Source  # noqa: E402
from jobs.actions import quotas  # noqa: E402
from jobs.actions.jobs import Actor  # noqa: E402
from jobs.models import Job, JobRun, RunStatus, RunTrigger, TeamQuota  # noqa: E402


def fill(jobs, runs, recent, active):
    database.empty()
    team, _ = Group.objects.get_or_create(name="bench-team")
    users = []
    for n in range(50):
        user, _ = User.objects.get_or_create(username=f"bench-user-{n}")
        user.groups.add(team)
        users.append(user)
    TeamQuota.objects.create(group=team, max_jobs=10**6, max_workflows=10**6, max_runs_per_hour=10**6,
                             max_runs_in_flight=10**6)
    made = Job.objects.bulk_create([Job(name=f"bench-{n}", kind="callable", target="builtin.noop",
                                        owner=users[n % 50], group=team if n % 2 else None) for n in range(jobs)])
    now, rng = timezone.now(), random.Random(7)
    rows = []
    for n in range(runs):
        job = made[n % jobs]
        at = now - timedelta(days=30) + timedelta(seconds=n * 30 * 86400 / runs)
        by = users[n % 50] if n % 10 == 0 else None
        rows.append(JobRun(job=job, scheduled_for=at + timedelta(microseconds=n), created_at=at, triggered_by=by,
                           trigger=RunTrigger.MANUAL if by else RunTrigger.SCHEDULE,
                           status=RunStatus.SUCCEEDED if rng.random() < 0.9 else RunStatus.FAILED))
    measured = users[0]
    rows += [JobRun(job=made[0], scheduled_for=now - timedelta(seconds=n + 1), created_at=now - timedelta(seconds=n + 1),
                    triggered_by=measured, trigger=RunTrigger.MANUAL, status=RunStatus.SUCCEEDED) for n in range(recent)]
    rows += [JobRun(job=made[n % jobs], scheduled_for=now + timedelta(seconds=n + 1), created_at=now,
                    status=RunStatus.QUEUED if n % 3 else RunStatus.RUNNING) for n in range(active)]
    JobRun.objects.bulk_create(rows, batch_size=5000)
    database.analyze("jobs_jobrun")
    database.analyze("jobs_job")
    return measured, team


def main():
    options = benchenv.arguments(__doc__, jobs=1000, runs=100_000,
                                 recent=(300, "the measured user's runs of the last hour"),
                                 active=(300, "runs not ended"), calls=1000)
    database.migrate()
    user, team = fill(options.jobs, options.runs, options.recent, options.active)
    actor = Actor(user, Source.API, "127.0.0.1", user.username)
    for label, group in (("the user's quotas (a job of no team, or of a team without quotas of runs)", None),
                         ("and the team's (a job of a team with quotas of runs)", team)):
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            assert quotas.runs_refusal(actor, group) is None
        times, cpu = [], time.process_time()
        with transaction.atomic():  # run now's transaction: the checks' cost, not BEGIN's and COMMIT's
            for _ in range(options.calls):
                start = time.perf_counter()
                quotas.runs_refusal(actor, group)
                times.append((time.perf_counter() - start) * 1000)
        cpu = (time.process_time() - cpu) / options.calls * 1000
        times.sort()
        print(f"{JobRun.objects.count()} runs, {options.calls} checks of {label}: {len(queries)} statement(s) each; "
              f"mean {statistics.fmean(times):.3f} ms, p50 {times[len(times) // 2]:.3f} ms, "
              f"p95 {times[int(len(times) * 0.95)]:.3f} ms; this process's CPU {cpu:.3f} ms a check")
    baseline = []
    with transaction.atomic(), connection.cursor() as cursor:
        for _ in range(options.calls):
            start = time.perf_counter()
            cursor.execute("SELECT 1")
            baseline.append((time.perf_counter() - start) * 1000)
    baseline.sort()
    print(f"beside: SELECT 1, p50 {baseline[len(baseline) // 2]:.3f} ms, p95 {baseline[int(len(baseline) * 0.95)]:.3f} ms "
          f"(the machine's round trip now); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            if "COUNT" not in query["sql"]:
                continue
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + query["sql"])
            print("\n" + query["sql"][:160] + "…")
            print("\n".join("    " + row[0] for row in cursor.fetchall()))


if __name__ == "__main__":
    main()
