"""Runs found by their status, as every query names it: ``status=``, ``status__in=``, and their
negations. The indexes read a derived ``phase`` (jobs.models.run.ThroughPhase), which is NULL for a
success: a negated lookup must still find the succeeded runs. Expected sets come from the runs this
test makes, one per status."""

from datetime import timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from jobs.models import JobRun, RunStatus

from .test_notifications_support import make_job, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_run_per_status():
    job = make_job("one-per-status")
    start = timezone.now()
    return {status: make_run(job, status=status, scheduled_for=start + timedelta(seconds=i)).pk
            for i, status in enumerate(RunStatus.values)}


@pytest.mark.parametrize("status", RunStatus.values)
def test_each_status_finds_its_run_and_its_negation_finds_every_other(one_run_per_status, status):
    every = set(one_run_per_status.values())
    mine = {one_run_per_status[status]}
    assert set(JobRun.objects.filter(status=status).values_list("pk", flat=True)) == mine
    assert set(JobRun.objects.exclude(status=status).values_list("pk", flat=True)) == every - mine
    assert set(JobRun.objects.filter(~Q(status=status)).values_list("pk", flat=True)) == every - mine


@pytest.mark.parametrize("statuses", [
    [RunStatus.QUEUED, RunStatus.RUNNING], [RunStatus.FAILED, RunStatus.LOST], [RunStatus.SKIPPED],
    [RunStatus.SUCCEEDED, RunStatus.FAILED], [RunStatus.PENDING, RunStatus.RETRYING, RunStatus.CANCELLED],
])
def test_a_set_of_statuses_finds_its_runs_and_its_negation_finds_every_other(one_run_per_status, statuses):
    every = set(one_run_per_status.values())
    mine = {one_run_per_status[status] for status in statuses}
    assert set(JobRun.objects.filter(status__in=statuses).values_list("pk", flat=True)) == mine
    assert set(JobRun.objects.exclude(status__in=statuses).values_list("pk", flat=True)) == every - mine
