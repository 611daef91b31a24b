"""An attempt lost to the infrastructure spends the run's lost budget, not max_retries, and is run
again at once; past that budget the run ends ``lost`` with its own notification event."""

import json
import subprocess

import pytest
from django.test import override_settings

from jobs import lifecycle
from jobs.models import AttemptOutcome, RunStatus
from notifications.models import Delivery

from .conftest import kombu_lists
from .test_notifications_support import channel_with_rule, make_job


def claim(run, worker="w1@host", pid=4321):
    claimed = lifecycle.claim(run.pk, run.attempt, worker, pid)
    assert claimed is not None
    return claimed


def published_attempts(redis_client, queue):
    """The task ids on the queue, oldest first, from whichever of kombu's priority lists holds them."""
    return [json.loads(raw)["headers"]["id"] for key in kombu_lists(queue)
            for raw in reversed(redis_client.lrange(key, 0, -1))]


@pytest.mark.django_db(transaction=True)
def test_a_lost_attempt_runs_again_at_once_whatever_max_retries(redis_client):
    job = make_job(max_retries=0, retry_backoff_seconds=600, queue="lost-q")
    run = lifecycle.create_run(job)
    claim(run)

    assert lifecycle.record_failure(run.pk, 1, "Lost: no heartbeat", lost=True) == RunStatus.QUEUED

    run.refresh_from_db()
    assert (run.status, run.attempt, run.lost_attempts, run.next_attempt_at) == (RunStatus.QUEUED, 2, 1, None)
    lost = run.attempts.get(number=1)
    assert (lost.outcome, lost.worker) == (AttemptOutcome.LOST, "w1@host")
    assert published_attempts(redis_client, "lost-q") == [f"run-{run.pk}-1", f"run-{run.pk}-2"]

    claim(run)
    assert lifecycle.record_success(run.pk, 2, "done", 4)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_the_job_keeps_its_retries_after_a_lost_attempt(redis_client):
    job = make_job(max_retries=1, retry_backoff_seconds=0, retry_jitter=False)
    run = lifecycle.create_run(job)
    claim(run)
    lifecycle.record_failure(run.pk, 1, "Lost", lost=True)
    run.refresh_from_db()
    claim(run)

    assert lifecycle.record_failure(run.pk, 2, "boom") == RunStatus.RETRYING  # the job's one retry is still there
    lifecycle.queue_due_retries()
    run.refresh_from_db()
    claim(run)
    assert lifecycle.record_failure(run.pk, 3, "boom again") == RunStatus.FAILED


@pytest.mark.django_db(transaction=True)
@override_settings(JOBS_MAX_LOST_ATTEMPTS=2)
def test_past_the_lost_budget_the_run_ends_lost_and_says_so(redis_client):
    job = make_job(max_retries=5)
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/hook"}, ["lost", "failed"])
    run = lifecycle.create_run(job)
    for attempt in (1, 2, 3):
        run.refresh_from_db()
        assert run.attempt == attempt
        claim(run)
        lifecycle.record_failure(run.pk, attempt, f"Lost: no heartbeat ({attempt})", lost=True)

    run.refresh_from_db()
    assert (run.status, run.lost_attempts, run.attempt) == (RunStatus.LOST, 3, 3)
    assert "more than the 2 allowed" in run.error
    assert run.is_terminal and run.finished_at is not None
    assert list(Delivery.objects.filter(run=run).values_list("event", flat=True)) == ["lost"]


@pytest.mark.django_db(transaction=True)
def test_a_job_may_set_its_own_lost_budget(redis_client):
    job = make_job(max_lost_attempts=0)
    run = lifecycle.create_run(job)
    claim(run)
    assert lifecycle.record_failure(run.pk, 1, "Lost", lost=True) == RunStatus.LOST


@pytest.mark.django_db(transaction=True)
def test_a_redelivery_of_an_attempt_whose_process_died_loses_it_at_once(redis_client):
    job = make_job(max_retries=0)
    run = lifecycle.create_run(job)
    dead = subprocess.Popen(["true"])
    dead.wait()
    claim(run, worker="w1@host", pid=dead.pid)

    # Celery delivers the message again (reject_on_worker_lost) to the same worker.
    assert lifecycle.claim(run.pk, 1, "w1@host", 99999) is None

    run.refresh_from_db()
    assert (run.status, run.attempt, run.lost_attempts) == (RunStatus.QUEUED, 2, 1)
    assert f"worker process {dead.pid} on w1@host died" in run.attempts.get(number=1).error


@pytest.mark.django_db(transaction=True)
def test_a_redelivery_leaves_an_attempt_alone_while_its_process_lives(redis_client):
    job = make_job(max_retries=0)
    run = lifecycle.create_run(job)
    alive = subprocess.Popen(["sleep", "30"])
    try:
        claim(run, worker="w1@host", pid=alive.pid)
        assert lifecycle.claim(run.pk, 1, "w1@host", 99999) is None
        assert lifecycle.claim(run.pk, 1, "w2@other", 99999) is None  # another host cannot tell: the monitor decides
    finally:
        alive.kill()
        alive.wait()
    run.refresh_from_db()
    assert (run.status, run.attempt) == (RunStatus.RUNNING, 1)
