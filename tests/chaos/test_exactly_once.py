"""Exactly once for a transactional function job (``@job_function(transactional=True)``): its rows in
the service's database and its run's success commit together. Pool processes are SIGKILLed in the
middle of runs, again and again: each killed attempt's row goes with it, and the table ends with
exactly one row per run. Its non-transactional twin, killed the same way, keeps the row of every
killed attempt as well (at-least-once): the check can tell the two apart."""

import os
import signal
import time

import pytest

from jobs import lifecycle
from jobs.models import AttemptOutcome, JobAttempt, RunStatus

from ..conftest import wait_for
from ..test_exactly_once import rows, rows_table_named
from .conftest import make_job

RUNS = 12
KILLS = 8  # pool processes killed, each in the middle of a run (after its insert, before its end)
SLEEP_SECONDS, FRESH_SECONDS = 3.0, 1.0  # how long a run sleeps after its insert; how far into it a kill comes
TABLE = "exactly_once_rows"


@pytest.fixture
def rows_table(transactional_db):
    with rows_table_named(TABLE) as table:
        yield table


def rows_by_run():
    found = {}
    for run_id, attempt in rows(TABLE):
        found.setdefault(run_id, []).append(attempt)
    return found


def kill_mid_run(job, ledger, killed, deadline):
    """SIGKILL the pool process of one attempt that has inserted its row and not ended, early in its
    sleep; wait until the attempt is declared lost. Returns the (run id, attempt) killed, or None
    when none is running early in its sleep now."""
    started = {row[1]: float(row[2]) for row in ledger.lines("start")}
    ended = {row[1] for row in ledger.lines("end")}
    running = JobAttempt.objects.filter(run__job=job, outcome=AttemptOutcome.RUNNING).values_list(
        "run_id", "number", "pid")
    for run_id, number, pid in running:
        key = f"{run_id}:{number}"
        # Only an attempt at most FRESH_SECONDS into its SLEEP_SECONDS: on a loaded machine, one read
        # late in its sleep had ended, and its process moved on, before the kill landed (CI, RabbitMQ).
        fresh = key in started and time.time() - started[key] < FRESH_SECONDS
        if fresh and key not in ended and (run_id, number) not in killed:
            os.kill(pid, signal.SIGKILL)
            over = JobAttempt.objects.filter(run_id=run_id, number=number).exclude(outcome=AttemptOutcome.RUNNING)
            wait_for(over.exists, timeout=max(1.0, deadline - time.monotonic()), interval=0.1,
                     message=f"the killed attempt {key} to be declared lost")
            return run_id, number
    return None


@pytest.mark.timeout(240)
@pytest.mark.parametrize("target, exactly_once", [("test.insert_row_once", True), ("test.insert_row", False)],
                         ids=["transactional", "non-transactional twin"])
def test_sigkilled_runs_leave_one_row_per_run_only_when_transactional(processes, ledger, scoreboard, rows_table,
                                                                       target, exactly_once):
    job = make_job(f"rows-{exactly_once}", target=target, max_retries=0, max_lost_attempts=KILLS + 2,
                   kwargs={"table": rows_table, "path": ledger.path, "seconds": SLEEP_SECONDS})
    processes.worker(concurrency=2)
    processes.beat()
    runs = [lifecycle.create_run(job) for _ in range(RUNS)]

    deadline = time.monotonic() + 150
    killed = []
    while len(killed) < KILLS and time.monotonic() < deadline:
        if (victim := kill_mid_run(job, ledger, killed, deadline)) is not None:
            killed.append(victim)
        elif not job.runs.exclude(status__in=[RunStatus.SUCCEEDED]).exists():
            break
        else:
            time.sleep(0.05)
    wait_for(lambda: not job.runs.exclude(status=RunStatus.SUCCEEDED).exclude(status=RunStatus.LOST)
             .exclude(status=RunStatus.FAILED).exists(), timeout=max(5.0, deadline - time.monotonic() + 60),
             message="every run to end")

    assert len(killed) == KILLS, f"only {len(killed)} kills landed mid-run"
    statuses = {run.pk: run.status for run in job.runs.all()}
    assert statuses == {run.pk: RunStatus.SUCCEEDED for run in runs}
    lost = set(JobAttempt.objects.filter(run__job=job, outcome=AttemptOutcome.LOST).values_list("run_id", "number"))
    assert set(killed) <= lost
    by_run = rows_by_run()
    final = dict(job.runs.values_list("pk", "attempt"))
    if exactly_once:
        # One row per run, the one its succeeding attempt wrote: no killed attempt left its row.
        assert by_run == {run_id: [attempt] for run_id, attempt in final.items()}
    else:
        # At-least-once: every killed attempt's row stayed, beside its rerun's.
        assert sorted((run_id, a) for run_id, attempts in by_run.items() for a in attempts) == sorted(
            [*killed, *final.items()])
        assert sum(len(attempts) - 1 for attempts in by_run.values()) == KILLS
    duplicates = sum(len(attempts) - 1 for attempts in by_run.values())
    scoreboard.record(f"{KILLS} SIGKILL pool process mid-run, {'transactional' if exactly_once else 'plain'} "
                      "function (rows per run)", RUNS, sum(s == RunStatus.SUCCEEDED for s in statuses.values()),
                      duplicates)
