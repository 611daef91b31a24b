"""The whole pipeline with real processes: beat dispatches, a worker runs, the database records."""

import subprocess

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.lifecycle.backoff import backoff_delay
from jobs.models import Job, JobRun, RunStatus

from .conftest import wait_for


def make_job(name, kind="callable", target="builtin.noop", schedule=None, **fields):
    return save_job(Job(name=name, kind=kind, target=target, **fields), schedule or {"type": "manual"})


def run_to_its_end(job, timeout=40):
    """A run made now (run now), once it has ended."""
    run = lifecycle.create_run(job)

    def finished():
        run.refresh_from_db()
        return run.is_terminal

    wait_for(finished, timeout=timeout, message="the run to finish")
    return run


def test_it_runs_an_interval_job_every_two_seconds_without_duplicates(processes, ledger):
    job = make_job("every-2s", target="test.ledger", kwargs={"path": ledger.path},
                   schedule={"type": "interval", "every_seconds": 2})
    processes.worker()
    processes.beat()

    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).count() >= 3, timeout=40,
             message="three succeeded runs")
    slots = list(job.runs.order_by("scheduled_for").values_list("scheduled_for", flat=True))
    assert len(slots) == len(set(slots))
    assert slots == sorted(slots)
    gaps = {(b - a).total_seconds() for a, b in zip(slots, slots[1:], strict=False)}
    assert gaps == {2.0}
    succeeded_keys = {f"{r.pk}:1" for r in job.runs.filter(status=RunStatus.SUCCEEDED)}
    assert succeeded_keys <= {line[1] for line in ledger.lines("end")}


def test_it_retries_with_growing_gaps_until_the_third_attempt_succeeds(processes, ledger):
    job = make_job("flaky", target="test.flaky", kwargs={"fail_times": 2, "path": ledger.path},
                   max_retries=3, retry_backoff_seconds=1, retry_jitter=False)
    processes.worker()
    processes.beat()

    run = run_to_its_end(job)

    assert run.status == RunStatus.SUCCEEDED
    assert run.attempt == 3
    attempts = list(run.attempts.order_by("number"))
    assert [a.outcome for a in attempts] == ["failed", "failed", "succeeded"]
    assert "failing attempt 1 on purpose" in attempts[0].traceback
    gaps = [(later.started_at - earlier.finished_at).total_seconds()
            for earlier, later in zip(attempts, attempts[1:], strict=False)]
    # Each retry starts no sooner than its backoff, which doubles (1 s, then 2 s); how much later is
    # the load's (the release tick, the broker, the worker): only that bound is the lifecycle's.
    backoffs = [backoff_delay(job, number, rand=None).total_seconds() for number in (1, 2)]
    assert backoffs == [1, 2]
    assert all(gap >= backoff for gap, backoff in zip(gaps, backoffs, strict=True)), (gaps, backoffs)


def test_it_fails_a_run_after_max_retries_plus_one_attempts(processes):
    job = make_job("always-fails", target="builtin.fail", max_retries=2, retry_backoff_seconds=0.2)
    processes.worker()
    processes.beat()

    run = run_to_its_end(job)

    assert run.status == RunStatus.FAILED
    assert run.attempt == 3
    assert list(run.attempts.values_list("outcome", flat=True)) == ["failed"] * 3
    assert "failing on purpose" in run.error


def test_it_kills_a_command_at_its_timeout_and_leaves_no_process(processes):
    marker = "sleep 61.4242"
    job = make_job("too-slow", kind="command", target=f"{marker}", timeout_seconds=2)
    processes.worker()

    run = run_to_its_end(job, timeout=30)

    assert run.status == RunStatus.TIMED_OUT
    assert "Timed out after 2 s" in run.error
    assert run.duration.total_seconds() < 10
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == []


def test_run_now_executes_exactly_once(processes, ledger):
    job = make_job("once-now", target="test.ledger", kwargs={"path": ledger.path})
    processes.worker()

    run = run_to_its_end(job, timeout=30)

    assert run.status == RunStatus.SUCCEEDED
    assert [line[1] for line in ledger.lines("start")] == [f"{run.pk}:1"]
    assert JobRun.objects.filter(job=job).count() == 1
    assert run.worker.startswith("w")
    assert run.attempts.get().pid > 0
