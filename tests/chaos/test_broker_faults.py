"""The broker killed while runs are queued and running, on each broker: Redis (SIGKILL, started again
empty), Sentinel (the master SIGKILLed, a sentinel promotes the replica) and RabbitMQ (SIGKILL, then
the node restarts on its data). The workers and the scheduler follow it, and every run ends once."""

import time

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import pause
from jobs.models import RunStatus

from ..brokers import BROKERS
from ..conftest import wait_for
from . import invariants
from .conftest import ledger_has, make_job, since

BACKLOG = 12


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.brokers(*BROKERS)
def test_nothing_is_lost_or_run_twice_when_the_broker_is_killed_with_runs_queued_and_running(
        processes, ledger, broker, scoreboard):
    backlog_job = make_job("backlog", kwargs={"path": ledger.path, "seconds": 1.5})
    ticking = make_job("ticking", kwargs={"path": ledger.path}, schedule={"type": "interval", "every_seconds": 1})
    worker = processes.worker(concurrency=2)
    processes.beat()
    wait_for(lambda: ticking.runs.filter(status=RunStatus.SUCCEEDED).count() >= 2, timeout=60,
             message="the worker and the scheduler at work")
    backlog = [lifecycle.create_run(backlog_job) for _ in range(BACKLOG)]
    wait_for(lambda: sum(ledger_has(ledger, "start", f"{run.pk}:1") for run in backlog) >= 1, timeout=30,
             message="a backlog run in progress")
    assert backlog_job.runs.filter(status=RunStatus.QUEUED).count() >= BACKLOG - 4  # most still wait

    broker.fault()
    faulted_at, fault_moment = time.monotonic(), ticking.runs.latest("scheduled_for").scheduled_for
    invariants.wait_terminal(invariants.runs_of(backlog_job), timeout=120)
    wait_for(lambda: ticking.runs.filter(status=RunStatus.SUCCEEDED, scheduled_for__gt=fault_moment).count() >= 3,
             timeout=60, message="scheduled runs after the fault")
    recovered = since(faulted_at)
    assert worker.poll() is None, "the worker process ended when the broker went away"

    paused_at = timezone.now()
    pause(ticking)
    slots = invariants.check_slots(ticking, paused_at, ledger)  # every slot due by the pause, from the clock
    verdicts = [invariants.check(invariants.runs_of(job), ledger, terminal_within=60)
                for job in (backlog_job, ticking)]
    duplicates = sum(v.duplicates for v in verdicts)
    scoreboard.record("12 SIGKILL the broker, runs queued and running", BACKLOG + slots.expected,
                      verdicts[0].succeeded + slots.seen, duplicates, recovered)
    assert verdicts[0].succeeded == BACKLOG
    assert duplicates == 0
