"""A function job past its time limits, through a real prefork worker: Celery's soft limit stops
it (timed_out); one that ignores the soft limit is killed at the hard limit, and the worker goes on."""

import pytest
from django.test import override_settings

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .conftest import wait_for


def sleepy_job(name, ledger, ignore_soft_limit=False):
    return save_job(Job(name=name, kind="callable", target="test.sleepy", timeout_seconds=2,
                        kwargs={"path": ledger.path, "seconds": 60, "ignore_soft_limit": ignore_soft_limit}),
                    {"type": "manual"})


def ended(run):
    run.refresh_from_db()
    return run.is_terminal


def lines(ledger, run):
    return [row[0] for row in ledger.lines() if row[1] == f"{run.pk}:1"]


@pytest.mark.timeout(90)
def test_a_function_past_its_soft_time_limit_is_stopped_and_timed_out(processes, ledger):
    job = sleepy_job("soft-limited", ledger)
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    wait_for(lambda: ended(run), timeout=40, message="the run to end")

    assert run.status == RunStatus.TIMED_OUT
    assert run.error == "Timed out after 2 s"
    assert run.attempts.get().outcome == "timed_out"
    assert lines(ledger, run) == ["start", "soft-limit"]  # stopped by the soft limit, never finished


@pytest.mark.timeout(120)
@override_settings(JOBS_KILL_GRACE_SECONDS=1)  # as in the tests' processes; the message carries the limits
def test_a_function_that_ignores_its_soft_limit_is_killed_at_the_hard_limit(processes, ledger):
    # Hard limit: timeout (2 s) + twice the kill grace + 5 s = 9 s, before the monitor's 14 s.
    job = sleepy_job("hard-limited", ledger, ignore_soft_limit=True)
    after = save_job(Job(name="after-the-kill", kind="callable", target="test.ledger",
                         kwargs={"path": ledger.path}), {"type": "manual"})
    processes.worker(concurrency=1)
    processes.beat()

    run = lifecycle.create_run(job)
    wait_for(lambda: ended(run), timeout=60, message="the run to end")

    assert run.status == RunStatus.TIMED_OUT
    assert run.error.startswith("Killed at the hard time limit")
    assert (run.attempt, run.attempts.get().outcome) == (1, "timed_out")
    assert lines(ledger, run) == ["start", "soft-limit"]  # went on past the soft limit, never finished

    next_run = lifecycle.create_run(after)  # the worker replaced the killed process and goes on
    wait_for(lambda: ended(next_run), timeout=30, message="a run after the kill")
    assert next_run.status == RunStatus.SUCCEEDED
