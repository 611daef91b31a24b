"""Self-fencing: a worker cut off from the database and the broker stops its attempt itself, before
the leader could declare it lost and run it elsewhere; a database that is only away (the broker
still answers) fences nothing.

A frozen PostgreSQL (SIGSTOP) behaves as one across a cut link: connections stay open and every
statement hangs. The worker's timings are the tests' (heartbeat 1 s, lost after 4 silent beats,
so it fences after 3 s). The times compared are the test's own clock against the job's own stamps.
"""

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.models import AttemptOutcome, RunStatus

from ..conftest import wait_for
from .conftest import make_job, ticks

FENCE_SECONDS = 3  # PROCESS_ENV: JOBS_HEARTBEAT_SECONDS 1 x (JOBS_LOST_AFTER_HEARTBEATS 4 - 1)


def ticking_job(name, path, ticks):
    """A one-time command job, due in a second, writing "<attempt> <epoch>" every 0.25 s, ``ticks`` times."""
    target = f'for i in $(seq 1 {ticks}); do echo "$JOB_ATTEMPT $(date +%s.%N)" >> {path}; sleep 0.25; done'
    return make_job(name, kind="command", target=target, timeout_seconds=120,
                    schedule={"type": "once", "run_at": (timezone.now() + timedelta(seconds=1)).isoformat()})


def fenced_after_ticks_stop(path, cut_at):
    """Wait until the ticks have stopped for 2 s; the seconds from the cut to the last one."""
    wait_for(lambda: time.time() - max(ticks(path)) > 2, timeout=30, message="the attempt to stop ticking")
    return max(ticks(path)) - cut_at


@pytest.mark.timeout(180)
@pytest.mark.brokers("redis")  # a private Redis the test kills
def test_a_worker_cut_off_from_database_and_broker_stops_its_attempt_itself(private_postgres, processes,
                                                                               broker, ticks_file):
    path = ticks_file
    # 18 s of work: long enough that the attempt could not finish by itself on a loaded machine
    # before the fence (3 s after the cut, plus the broker's probe and the kill) stops it.
    job = ticking_job("fenced", path, ticks=72)
    processes.worker(concurrency=1)
    processes.beat()
    wait_for(lambda: len(ticks(path, 1)) >= 4, timeout=60, message="the first attempt to tick")

    private_postgres.freeze()  # the worker's host cut off: neither the database...
    broker.kill()  # ...nor the broker can be reached
    cut_at = time.time()
    stopped_after = fenced_after_ticks_stop(path, cut_at)
    broker.start()
    private_postgres.thaw()
    healed_at = time.time()

    run = wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).first(), timeout=90,
                   message="the run to succeed once the host is back")
    attempts = list(run.attempts.order_by("number"))
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST, AttemptOutcome.SUCCEEDED]
    assert "stopped the attempt itself" in attempts[0].error
    assert stopped_after < FENCE_SECONDS + 4  # the fence, the broker's probe (up to 2 s) and the kill
    first, second = ticks(path, 1), ticks(path, 2)
    assert max(first) < cut_at + stopped_after + 0.5 and len(first) < 72 and len(second) == 72
    assert min(second) > max(first) and min(second) > healed_at - 1  # never both at once
    print(f"\nFENCE cut off: the attempt stopped {stopped_after:.1f} s after the cut; the rerun started "
          f"{min(second) - healed_at:.1f} s after the host was back")


@pytest.mark.timeout(180)
def test_a_database_away_with_the_broker_reachable_fences_nothing(private_postgres, processes, broker,
                                                                     ticks_file):
    path = ticks_file
    job = ticking_job("kept", path, ticks=60)  # 15 s of work
    processes.worker(concurrency=1)
    processes.beat()
    wait_for(lambda: len(ticks(path, 1)) >= 4, timeout=60, message="the attempt to tick")

    private_postgres.freeze()
    frozen_at = time.time()
    time.sleep(FENCE_SECONDS + 4)
    during = [stamp for stamp in ticks(path, 1) if stamp > frozen_at]
    private_postgres.thaw()

    run = wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).first(), timeout=90,
                   message="the run to succeed")
    assert len(during) >= 4 * FENCE_SECONDS  # it kept ticking all through the database's absence
    assert [a.outcome for a in run.attempts.order_by("number")] == [AttemptOutcome.SUCCEEDED]
    assert len(ticks(path)) == 60


@pytest.mark.timeout(240)  # the test database's set-up counts too, slow on a loaded machine
def test_a_function_declared_lost_while_its_pool_process_was_frozen_ends_once_the_process_goes_on(
        processes, ticks_file):
    # Found by the nemesis (seed 38041): a frozen process's function ran on to its end once continued,
    # beside its rerun. 80 ticks: 20 s of work, which the first attempt must not get to finish.
    job = make_job("frozen-function", target="test.ticks", kwargs={"path": str(ticks_file), "count": 80})
    worker = processes.worker(concurrency=2)
    processes.beat()
    run = lifecycle.create_run(job)
    wait_for(lambda: len(ticks(ticks_file, 1)) >= 4, timeout=60, message="the first attempt to tick")
    pool_process = run.attempts.get(number=1).pid

    os.kill(pool_process, signal.SIGSTOP)
    try:
        wait_for(lambda: run.attempts.filter(number=2).exists(), timeout=60,
                 message="the frozen attempt to be declared lost and run again")
    finally:
        os.kill(pool_process, signal.SIGCONT)
    continued_at = time.time()
    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).exists(), timeout=90, message="the rerun to succeed")
    wait_for(lambda: time.time() - max(ticks(ticks_file, 1)) > 2, timeout=30, message="the first attempt to stop")

    first = ticks(ticks_file, 1)
    # The attempt that succeeded ran the whole function: the second, or a later one when a loaded
    # machine made the second's heartbeats late too.
    finished = run.attempts.get(outcome=AttemptOutcome.SUCCEEDED).number
    assert len(first) < 80 and finished > 1 and len(ticks(ticks_file, finished)) == 80
    assert "declared this attempt lost while this process was silent" in Path(worker.log_path).read_text()
    print(f"\nFENCE frozen function: it stopped {max(first) - continued_at:.1f} s after its process was continued")
