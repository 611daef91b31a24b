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


def failover(sig, processes, job, runs, dispatch):
    """A worker and two beats, ba and bb (dispatching as ``dispatch`` says); once one leads and ``job``
    has ``runs`` runs, ``sig`` sent to the leader; once the other leads and ``job`` has ``runs`` runs
    more: (the leader's process, the new leader's name, the seconds it took to lead)."""
    processes.worker()
    beats = {name: processes.beat(name=name, **AHEAD[dispatch]) for name in ("ba", "bb")}
    leader = wait_for_leader()
    wait_for_runs(job, runs)
    processes.kill(beats[leader], sig)
    signalled_at, moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    standby = wait_for_leader(other_than=leader)
    recovered = since(signalled_at)
    wait_for_runs(job, runs, after=moment)
    return beats[leader], standby, recovered


def no_slot_ran_twice(job, ledger, scoreboard, scenario, recovered=None):
    """Pause ``job`` and check its slots (``pause_and_check``): none ran twice; the scenario's row on
    the scoreboard. Returns the slots."""
    slots, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record(scenario, slots.expected, slots.seen, verdict.duplicates, recovered)
    return slots


@pytest.mark.timeout(90)
@pytest.mark.parametrize("dispatch", AHEAD)
def test_it_misses_no_slot_when_the_leader_is_killed(processes, ledger, scoreboard, dispatch):
    job = every_second_job("leader-killed", ledger)
    _, _, recovered = failover(signal.SIGKILL, processes, job, 3, dispatch)
    # No run waits for a message the dead leader held (the monitor would send it a minute later).
    past = job.runs.filter(status=RunStatus.QUEUED, scheduled_for__lt=timezone.now() - timedelta(seconds=3))
    wait_for(lambda: not past.exists(), timeout=10, message=lambda: f"no run queued past its slot: {list(past)}")

    no_slot_ran_twice(job, ledger, scoreboard, f"3 SIGKILL beat leader ({dispatch})", recovered)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("dispatch", AHEAD)
def test_it_duplicates_no_slot_when_a_frozen_leader_comes_back(processes, ledger, scoreboard, dispatch):
    job = every_second_job("leader-frozen", ledger)
    frozen, standby, recovered = failover(signal.SIGSTOP, processes, job, 2, dispatch)
    processes.kill(frozen, signal.SIGCONT)
    resumed_moment = job.runs.latest("scheduled_for").scheduled_for
    wait_for_runs(job, 3, after=resumed_moment)

    assert leader_node() == standby
    wait_for(lambda: "lost the leadership" in Path(frozen.log_path).read_text(), timeout=10,
             message="the thawed leader to step down")
    no_slot_ran_twice(job, ledger, scoreboard, f"4 SIGSTOP leader past TTL ({dispatch})", recovered)


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

    slots = no_slot_ran_twice(job, ledger, scoreboard, "5 two leading beats for 60 s")
    assert slots.expected >= 55
