"""Workers dying, stopping, or getting the same message twice: every run still ends, once."""

import os
import signal
import subprocess
import sys
import time

import pytest

from jobs import runs
from jobs.models import DeliveryCounter, RunStatus

from ..conftest import REPO, wait_for
from . import invariants
from .conftest import ledger_has, make_job, since, started_attempt

DROPPED = runs.DUPLICATES_DROPPED


@pytest.mark.timeout(60)
def test_it_retries_an_attempt_whose_pool_child_was_killed(processes, ledger, scoreboard):
    job = make_job("child-killed", kwargs={"path": ledger.path, "seconds": 2}, max_retries=1,
                   retry_backoff_seconds=0.2, retry_jitter=False)
    processes.worker(concurrency=1)
    processes.beat()
    run = runs.run_now(job)
    attempt = started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")

    os.kill(attempt.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=40)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.attempt == 2
    assert list(run.attempts.order_by("number").values_list("outcome", flat=True)) == ["lost", "succeeded"]
    assert verdict.duplicates == 0
    scoreboard.record("1 SIGKILL pool child", 1, verdict.succeeded, verdict.duplicates, since(killed_at))


@pytest.mark.timeout(60)
def test_it_completes_a_run_on_the_other_worker_when_one_is_killed(processes, ledger, scoreboard):
    job = make_job("worker-killed", kwargs={"path": ledger.path, "seconds": 2}, max_retries=1,
                   retry_backoff_seconds=0.2, retry_jitter=False)
    workers = {"wa": processes.worker(concurrency=1, name="wa"), "wb": processes.worker(concurrency=1, name="wb")}
    processes.beat()
    run = runs.run_now(job)
    attempt = started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")

    victim = attempt.worker.split("@")[0]
    processes.kill(workers[victim], signal.SIGKILL, group=True)
    killed_at = time.monotonic()
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=30)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert not run.worker.startswith(victim)
    assert verdict.duplicates == 0
    scoreboard.record("2 SIGKILL whole worker", 1, verdict.succeeded, verdict.duplicates, since(killed_at))


@pytest.mark.timeout(60)
def test_it_lets_the_current_run_finish_on_sigterm(processes, ledger, scoreboard):
    job = make_job("warm-shutdown", kwargs={"path": ledger.path, "seconds": 2})
    worker = processes.worker(concurrency=1)
    run = runs.run_now(job)
    started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")

    processes.kill(worker, signal.SIGTERM, group=False)
    stopped_at = time.monotonic()
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=20)
    worker.wait(timeout=20)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.attempt == 1
    assert verdict.duplicates == 0
    scoreboard.record("9 SIGTERM worker (warm)", 1, verdict.succeeded, verdict.duplicates, since(stopped_at))


@pytest.mark.timeout(60)
def test_it_kills_a_command_that_ignores_sigterm_at_its_timeout(processes, scoreboard):
    marker = "sleep 60.7373"
    job = make_job("ignores-term", kind="command", target=f'trap "" TERM; {marker}', timeout_seconds=2)
    processes.worker(concurrency=1)
    run = runs.run_now(job)
    started_attempt(run)
    started = time.monotonic()

    verdict = invariants.check(invariants.runs_of(job), terminal_within=30, expect_succeeded=False)

    run.refresh_from_db()
    assert run.status == RunStatus.TIMED_OUT
    assert "Timed out after 2 s" in run.error
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == []
    scoreboard.record("10 command ignores SIGTERM", 1, verdict.runs, verdict.duplicates, since(started))


def test_it_refuses_a_visibility_timeout_shorter_than_the_longest_run():
    # A run longer than the broker's visibility timeout cannot be configured: settings refuse it.
    env = dict(os.environ, JOBS_MAX_TIMEOUT_SECONDS="6", CELERY_VISIBILITY_TIMEOUT="4", PYTHONPATH=str(REPO),
               DJANGO_SETTINGS_MODULE="scheduler_site.settings")
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "CELERY_VISIBILITY_TIMEOUT (4s) must be longer than JOBS_MAX_TIMEOUT_SECONDS (6s)" in done.stderr


@pytest.mark.timeout(60)
def test_it_executes_once_when_a_running_attempt_is_delivered_again(processes, ledger, scoreboard):
    # What a visibility-timeout redelivery looks like to a worker: the same (run, attempt)
    # message again while the first delivery is still running. The claim drops it.
    job = make_job("redelivered", kwargs={"path": ledger.path, "seconds": 3})
    processes.worker(concurrency=2)
    run = runs.run_now(job)
    started_attempt(run)
    dropped_before = DeliveryCounter.get(DROPPED)

    runs.publish(run.pk, 1, job)
    wait_for(lambda: DeliveryCounter.get(DROPPED) > dropped_before, timeout=20, message="the redelivery dropped")
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=20)

    assert [row[1] for row in ledger.lines("start")] == [f"{run.pk}:1"]
    assert verdict.duplicates == 0
    scoreboard.record("11 redelivery of a running run", 1, verdict.succeeded, verdict.duplicates)
