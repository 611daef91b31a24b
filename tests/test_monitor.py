"""The monitor's bounds on states that could otherwise last forever."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from jobs.scheduling import monitor

pytestmark = pytest.mark.django_db


@override_settings(JOBS_MAX_WAIT_SECONDS=600)
def test_it_fails_a_run_that_no_worker_started_within_the_bound():
    job = save_job(Job(name="orphan", kind="callable", target="builtin.noop", queue="nobody-listens"),
                   {"type": "manual"})
    now = timezone.now()
    old = JobRun.objects.create(job=job, status=RunStatus.QUEUED, scheduled_for=now - timedelta(hours=1),
                                created_at=now - timedelta(seconds=601), queued_at=now - timedelta(seconds=601))
    fresh = JobRun.objects.create(job=job, status=RunStatus.QUEUED, scheduled_for=now, created_at=now, queued_at=now)

    assert monitor.fail_never_started(now) == 1

    old.refresh_from_db()
    fresh.refresh_from_db()
    assert old.status == RunStatus.FAILED
    assert "Never started: waited more than 600 s" in old.error
    assert "queue 'nobody-listens'" in old.error
    assert fresh.status == RunStatus.QUEUED
    assert monitor.fail_never_started(now) == 0


@override_settings(JOBS_MAX_WAIT_SECONDS=600, JOBS_HEARTBEAT_SECONDS=2, JOBS_LOST_AFTER_HEARTBEATS=3)
def test_after_a_database_outage_queued_runs_wait_a_lost_window_before_they_are_given_up_on():
    # One may be a run whose claim the outage lost, still running: its worker takes the claim back
    # at its next heartbeat (jobs.lifecycle.restore_claim), if the monitor leaves it alone that long.
    job = save_job(Job(name="after-outage", kind="callable", target="builtin.noop"), {"type": "manual"})
    now = timezone.now()
    long_ago = now - timedelta(seconds=601)
    run = JobRun.objects.create(job=job, status=RunStatus.QUEUED, scheduled_for=long_ago, created_at=long_ago,
                                queued_at=long_ago)

    assert monitor.check_once(now, watched_seconds=5)["never_started"] == 0
    assert JobRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert monitor.check_once(now, watched_seconds=6)["never_started"] == 1
    assert JobRun.objects.get(pk=run.pk).status == RunStatus.FAILED
