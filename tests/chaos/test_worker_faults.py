"""Workers dying, stopping, or getting the same message twice: every run still ends, once."""

import os
import signal
import subprocess
import sys
import time

import pytest

from jobs import lifecycle
from jobs.models import DeliveryCounter, RunStatus

from ..brokers import BROKERS
from ..conftest import REPO, wait_for
from . import invariants
from .conftest import DEFAULT_TIMINGS, ledger_has, make_job, since, started_attempt

DROPPED = lifecycle.DUPLICATES_DROPPED


# The promise of a worker's death with the service's default timings (heartbeat every 2 s, lost after
# 4 silent beats, a 1 s tick): the run is run again and succeeds within this many seconds of the kill.
RERUN_WITHIN_SECONDS = 20


def succeeded_after_kill(run, killed_at):
    """Wait, within the promise, for the run to succeed; the seconds it took from the kill."""
    wait_for(lambda: run.__class__.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(),
             timeout=RERUN_WITHIN_SECONDS - since(killed_at), interval=0.1,
             message=f"run {run.pk} to succeed within {RERUN_WITHIN_SECONDS} s of the kill")
    return since(killed_at)


def assert_rerun_once(run, ledger, verdict):
    run.refresh_from_db()
    assert (run.status, run.attempt, run.lost_attempts) == (RunStatus.SUCCEEDED, 2, 1)
    assert list(run.attempts.order_by("number").values_list("outcome", flat=True)) == ["lost", "succeeded"]
    assert [row[1] for row in ledger.lines("start")] == [f"{run.pk}:1", f"{run.pk}:2"]
    assert [row[1] for row in ledger.lines("end")] == [f"{run.pk}:2"]
    assert verdict.duplicates == 0


@pytest.mark.timeout(90)
@pytest.mark.brokers(*BROKERS)  # each broker delivers a dead worker's message again its own way
def test_a_run_whose_pool_child_was_killed_succeeds_on_the_rerun_with_no_retries(processes, ledger, scoreboard):
    job = make_job("child-killed", kwargs={"path": ledger.path, "seconds": 2}, max_retries=0)
    processes.worker(concurrency=1, **DEFAULT_TIMINGS)
    processes.beat(**DEFAULT_TIMINGS)
    run = lifecycle.create_run(job)
    attempt = started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")

    os.kill(attempt.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    recovered = succeeded_after_kill(run, killed_at)

    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=10)
    assert_rerun_once(run, ledger, verdict)
    scoreboard.record("1 SIGKILL pool child (default timings, max_retries 0)", 1, verdict.succeeded,
                      verdict.duplicates, recovered)


@pytest.mark.timeout(90)
@pytest.mark.brokers(*BROKERS)
def test_a_run_whose_worker_was_killed_succeeds_on_the_other_worker_with_no_retries(processes, ledger, scoreboard):
    job = make_job("worker-killed", kwargs={"path": ledger.path, "seconds": 2}, max_retries=0)
    workers = {name: processes.worker(concurrency=1, name=name, **DEFAULT_TIMINGS) for name in ("wa", "wb")}
    processes.beat(**DEFAULT_TIMINGS)
    run = lifecycle.create_run(job)
    attempt = started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")

    victim = attempt.worker.split("@")[0]
    processes.kill(workers[victim], signal.SIGKILL, group=True)
    killed_at = time.monotonic()
    recovered = succeeded_after_kill(run, killed_at)

    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=10)
    assert_rerun_once(run, ledger, verdict)
    assert not run.worker.startswith(victim)
    assert run.attempts.get(number=1).worker.startswith(victim)
    scoreboard.record("2 SIGKILL whole worker (default timings, max_retries 0)", 1, verdict.succeeded,
                      verdict.duplicates, recovered)


@pytest.mark.timeout(60)
def test_it_lets_the_current_run_finish_on_sigterm(processes, ledger, scoreboard):
    job = make_job("warm-shutdown", kwargs={"path": ledger.path, "seconds": 2})
    worker = processes.worker(concurrency=1)
    run = lifecycle.create_run(job)
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
    run = lifecycle.create_run(job)
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


@pytest.mark.timeout(120)
@pytest.mark.redis_only("the visibility timeout is Redis's (RabbitMQ redelivers on a lost connection)")
def test_a_run_longer_than_the_visibility_timeout_executes_once(processes, ledger, scoreboard, tmp_path):
    # Redis hands an unacknowledged message out again once it is older than the visibility
    # timeout; the settings refuse one shorter than the longest job, so both are lowered here.
    # kombu restores such messages when a consumer starts (and every ~100 s after): a second
    # worker, started once the timeout has passed, brings the running run's message back.
    # The run holds until the test releases it: a fixed length (it was 14 s) ran out in a loaded CI
    # run before the second worker had even started.
    short = {"CELERY_VISIBILITY_TIMEOUT": "4", "JOBS_MAX_TIMEOUT_SECONDS": "2"}
    release = tmp_path / "release"
    job = make_job("outlives-visibility", target="test.ledger_held",
                   kwargs={"path": ledger.path, "release": str(release), "seconds": 90}, timeout_seconds=100)
    processes.worker(concurrency=1, name="wa", **short)
    run = lifecycle.create_run(job)
    started_attempt(run)
    wait_for(lambda: ledger_has(ledger, "start", f"{run.pk}:1"), message="the job to start")
    time.sleep(5)  # past the visibility timeout

    processes.worker(concurrency=1, name="wb", **short)
    wait_for(lambda: DeliveryCounter.get(DROPPED) >= 1, timeout=30, message="the message delivered again")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # redelivered while the first delivery still runs it
    release.touch()

    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=30)
    run.refresh_from_db()
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert [row[1] for row in ledger.lines("start")] == [f"{run.pk}:1"]
    assert verdict.duplicates == 0
    scoreboard.record("11 run longer than the visibility timeout (redelivered)", 1, verdict.succeeded,
                      verdict.duplicates)



# Attempt 1 ticks until it is killed, attempt 2 ten times; so does a process each attempt puts in a
# session of its own (setsid), out of the reach of a kill of the command's process group.
TICKING = """n=10; [ "$JOB_ATTEMPT" = 1 ] && n=100000
setsid sh -c 'i=0; while [ $i -lt $1 ]; do echo "attempt $JOB_ATTEMPT escaped" >> {path}; i=$((i+1)); sleep 0.1; done' \
    sh $n &
i=0; while [ $i -lt $n ]; do echo "attempt $JOB_ATTEMPT main" >> {path}; i=$((i+1)); sleep 0.1; done
wait"""


def lines_of(path, attempt=None):
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [words for words in rows if len(words) == 3 and (attempt is None or words[1] == str(attempt))]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("victim", ["pool process", "worker"])
def test_a_command_is_dead_before_its_run_is_run_again(processes, ticks_file, victim):
    """SIGKILL of the pool process running a command, or of the worker's main process (its pool
    processes die with it): the command, and what it started in a session of its own, stop at
    once; the file they append to shows no line of attempt 1 after the first of attempt 2."""
    job = make_job(f"ticking {victim}", kind="command", target=TICKING.format(path=ticks_file), max_retries=0,
                   timeout_seconds=60)
    workers = {name: processes.worker(concurrency=1, name=name) for name in ("wa", "wb")}
    processes.beat()
    run = lifecycle.create_run(job)
    attempt = started_attempt(run)
    try:
        wait_for(lambda: {"main", "escaped"} <= {words[2] for words in lines_of(ticks_file, 1)}, timeout=30,
                 message="attempt 1 and its escaped process to tick")
        if victim == "pool process":
            os.kill(attempt.pid, signal.SIGKILL)
        else:
            processes.kill(workers[attempt.worker.split("@")[0]], signal.SIGKILL, group=False)
        wait_for(lambda: run.__class__.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=60,
                 message="the run to succeed on its rerun")

        rows = lines_of(ticks_file)
        first_of_rerun = next(i for i, words in enumerate(rows) if words[1] == "2")
        late = [" ".join(words) for words in rows[first_of_rerun:] if words[1] == "1"]
        assert late == [], f"attempt 1 went on beside attempt 2: {late[:4]}"
        run.refresh_from_db()
        assert (run.attempt, run.lost_attempts) == (2, 1)
    finally:  # what the old code let live
        subprocess.run(["pkill", "-KILL", "-f", str(ticks_file)])
