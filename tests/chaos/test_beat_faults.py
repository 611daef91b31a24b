"""Beat leaders dying, freezing, or running side by side: every slot runs, and only once."""

import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.models import RunStatus

from ..conftest import wait_for
from .conftest import every_second_job, leader_node, pause_and_check, since, wait_for_leader, wait_for_runs

# Leadership lives in PostgreSQL: the broker plays no part in these faults.
pytestmark = pytest.mark.brokers("redis")

# Every slot dispatched ahead (jobs.lifecycle.ahead): the leader holds the next 5 s of messages in
# its memory when it dies or freezes, and the next one must send them, not the monitor a minute later.
AHEAD = {"at the slot": {}, "ahead": {"JOBS_DISPATCH_AHEAD_SECONDS": "5", "JOBS_DISPATCH_AHEAD_MIN_JOBS": "1",
                                     "JOBS_REPUBLISH_AFTER_SECONDS": "60"}}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("dispatch", AHEAD)
def test_it_misses_no_slot_when_the_leader_is_killed(processes, ledger, scoreboard, dispatch):
    job = every_second_job("leader-killed", ledger)
    processes.worker()
    beats = {"ba": processes.beat(name="ba", **AHEAD[dispatch]), "bb": processes.beat(name="bb", **AHEAD[dispatch])}
    leader = wait_for_leader()
    wait_for_runs(job, 3)

    processes.kill(beats[leader], signal.SIGKILL)
    killed_at, killed_moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    wait_for_leader(other_than=leader)
    recovered = since(killed_at)
    wait_for_runs(job, 3, after=killed_moment)
    # No run waits for a message the dead leader held (the monitor would send it a minute later).
    past = job.runs.filter(status=RunStatus.QUEUED, scheduled_for__lt=timezone.now() - timedelta(seconds=3))
    wait_for(lambda: not past.exists(), timeout=10, message=f"no run queued past its slot: {list(past)}")

    slots, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record(f"3 SIGKILL beat leader ({dispatch})", slots.expected, slots.seen, verdict.duplicates, recovered)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("dispatch", AHEAD)
def test_it_duplicates_no_slot_when_a_frozen_leader_comes_back(processes, ledger, scoreboard, dispatch):
    job = every_second_job("leader-frozen", ledger)
    processes.worker()
    beats = {"ba": processes.beat(name="ba", **AHEAD[dispatch]), "bb": processes.beat(name="bb", **AHEAD[dispatch])}
    leader = wait_for_leader()
    wait_for_runs(job, 2)

    processes.kill(beats[leader], signal.SIGSTOP)
    stopped_at, stopped_moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    standby = wait_for_leader(other_than=leader)
    recovered = since(stopped_at)
    wait_for_runs(job, 2, after=stopped_moment)
    processes.kill(beats[leader], signal.SIGCONT)
    resumed_moment = job.runs.latest("scheduled_for").scheduled_for
    wait_for_runs(job, 3, after=resumed_moment)

    assert leader_node() == standby
    wait_for(lambda: "lost the leadership" in Path(beats[leader].log_path).read_text(), timeout=10,
             message="the thawed leader to step down")
    slots, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record(f"4 SIGSTOP leader past TTL ({dispatch})", slots.expected, slots.seen, verdict.duplicates, recovered)


@pytest.mark.timeout(150)
def test_it_creates_one_run_per_slot_with_two_beats_side_by_side(processes, ledger, scoreboard):
    # Each beat has a lock of its own, so both lead and both dispatch every tick for a minute:
    # only the one-run-per-slot constraint stands between them and duplicate runs.
    job = every_second_job("two-beats", ledger)
    processes.worker()
    processes.beat(name="ba", JOBS_LEADER_KEY="lock-a")
    processes.beat(name="bb", JOBS_LEADER_KEY="lock-b")
    wait_for_runs(job, 1)
    time.sleep(60)

    slots, verdict = pause_and_check(job, ledger)
    assert slots.expected >= 55
    assert verdict.duplicates == 0
    scoreboard.record("5 two leading beats for 60 s", slots.expected, slots.seen, verdict.duplicates)
