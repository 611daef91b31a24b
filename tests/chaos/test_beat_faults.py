"""Beat leaders dying, freezing, or running side by side: every slot runs, and only once."""

import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.definitions.jobs import pause
from jobs.models import RunStatus

from ..conftest import wait_for
from . import invariants
from .conftest import leader_node, make_job, since, wait_for_leader

# Leadership lives in PostgreSQL: the broker plays no part in these faults.
pytestmark = pytest.mark.brokers("redis")


def every_second_job(name, ledger):
    return make_job(name, kwargs={"path": ledger.path}, schedule={"type": "interval", "every_seconds": 1})


def wait_for_runs(job, count, after=None, timeout=20):
    runs = job.runs.filter(status=RunStatus.SUCCEEDED)
    if after is not None:
        runs = runs.filter(scheduled_for__gt=after)
    wait_for(lambda: runs.count() >= count, timeout=timeout, message=f"{count} succeeded runs")


def pause_and_check(job, ledger):
    """Pause the job so no slot is added (beat keeps running its monitor), then check every slot
    due by then on the test's clock, and the runs."""
    paused_at = timezone.now()
    pause(job)
    slots = invariants.check_slots(job, paused_at, ledger)
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=30)
    return slots, verdict


@pytest.mark.timeout(90)
def test_it_misses_no_slot_when_the_leader_is_killed(processes, ledger, scoreboard):
    job = every_second_job("leader-killed", ledger)
    processes.worker()
    beats = {"ba": processes.beat(name="ba"), "bb": processes.beat(name="bb")}
    leader = wait_for_leader()
    wait_for_runs(job, 3)

    processes.kill(beats[leader], signal.SIGKILL)
    killed_at, killed_moment = time.monotonic(), job.runs.latest("scheduled_for").scheduled_for
    wait_for_leader(other_than=leader)
    recovered = since(killed_at)
    wait_for_runs(job, 3, after=killed_moment)

    slots, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    scoreboard.record("3 SIGKILL beat leader", slots.expected, slots.seen, verdict.duplicates, recovered)


@pytest.mark.timeout(90)
def test_it_duplicates_no_slot_when_a_frozen_leader_comes_back(processes, ledger, scoreboard):
    job = every_second_job("leader-frozen", ledger)
    processes.worker()
    beats = {"ba": processes.beat(name="ba"), "bb": processes.beat(name="bb")}
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
    scoreboard.record("4 SIGSTOP leader past TTL", slots.expected, slots.seen, verdict.duplicates, recovered)


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
