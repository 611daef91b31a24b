"""A one-time job runs once at its moment through real processes, and never again: not after an
edit of the job, not after the scheduler restarts (stock beat re-ran one-offs, dcb#828)."""

import signal
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobs.coordination import leases
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .chaos.conftest import wait_for_leader
from .conftest import wait_for


def leader_ticked_since(moment):
    """Whether the leader's last housekeeping pass (recorded in its lease) came after ``moment``."""
    state = leases.state(settings.JOBS_LEADER_KEY)
    return bool(state and state["last_tick_at"] and state["last_tick_at"].timestamp() > moment)


@pytest.mark.timeout(120)
def test_a_one_time_job_runs_once_and_never_again_across_a_beat_restart(processes, ledger):
    run_at = timezone.now() + timedelta(seconds=3)
    job = save_job(Job(name="once", kind="callable", target="test.ledger", kwargs={"path": ledger.path}),
                   {"type": "once", "run_at": run_at.isoformat()})
    processes.worker(concurrency=1)
    first_beat = processes.beat(name="ba")
    run = wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).first(), timeout=40,
                   message="the one-time run")
    assert run.scheduled_for == run_at

    save_job(Job.objects.get(pk=job.pk), {"type": "once", "run_at": run_at.isoformat()})  # an edit, same moment
    processes.kill(first_beat, signal.SIGKILL)
    processes.beat(name="bb")
    wait_for_leader(timeout=30, other_than="ba")
    restarted = time.time()
    # Two seconds of the new leader's ticks (each 0.2 s) after it took over.
    wait_for(lambda: leader_ticked_since(restarted + 2), timeout=30, message="the new leader's ticks")

    job.refresh_from_db()
    assert job.next_run_at is None
    assert [row[1] for row in ledger.lines("start")] == [f"{run.pk}:1"]
    assert list(job.runs.values_list("pk", flat=True)) == [run.pk]
