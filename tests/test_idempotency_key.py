"""The idempotency key job code gets (guarantee 3) through real workers: the same on every attempt
of a run (a retry, an attempt lost with its pool process) and on every re-run of its slot (a
workflow re-run), different for another slot; the attempt number comes separately. The key is
"<job id>:<slot in UTC, ISO 8601 to the microsecond>", alike in a callable's context, a command's
environment and the API."""

import os
import signal
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from jobs import lifecycle
from jobs.actions import jobs as actions
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from workflows import progress
from workflows.models import WorkflowRunStatus

from .conftest import wait_for
from .workflow_helpers import make_workflow


def key_of(job, slot):
    """The key the docs promise (docs/guide/jobs.md) for ``job``'s run of ``slot``."""
    return f"{job.pk}:{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"


def keys_seen(ledger):
    """[(key, attempt, run id)] in the order the job saw them (tests.jobfuncs.keys)."""
    return [(key, int(attempt), int(run_id)) for _, key, attempt, run_id in ledger.lines("key")]


def keys_job(name, max_retries=1, **kwargs):
    return save_job(Job(name=name, kind="callable", target="test.keys", kwargs=kwargs, max_retries=max_retries,
                        retry_backoff_seconds=0, retry_jitter=False), {"type": "manual"})


def succeeded(run, timeout=40):
    wait_for(lambda: JobRun.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=timeout,
             message=f"run {run.pk} to succeed")
    run.refresh_from_db()
    return run


def api_key(run):
    client = Client()
    client.force_login(User.objects.get_or_create(username="key-reader", defaults={"is_staff": True})[0])
    return client.get(f"/api/runs/{run.pk}/").json()["idempotency_key"]


@pytest.mark.timeout(90)
def test_a_retry_gets_the_same_key_and_the_next_attempt_number(processes, ledger):
    job = keys_job("retried", path=ledger.path, fail_times=1)
    processes.worker(concurrency=1)
    processes.beat()

    run = succeeded(lifecycle.create_run(job))

    key = key_of(job, run.scheduled_for)
    assert keys_seen(ledger) == [(key, 1, run.pk), (key, 2, run.pk)]
    assert api_key(run) == key


@pytest.mark.timeout(90)
def test_an_attempt_lost_with_its_pool_process_is_run_again_with_the_same_key(processes, ledger):
    job = keys_job("lost", path=ledger.path, hold_first_seconds=60)
    processes.worker(concurrency=1)
    processes.beat()
    run = lifecycle.create_run(job)
    attempt = wait_for(lambda: run.attempts.filter(number=1).first(), message="the first attempt to start")
    wait_for(lambda: keys_seen(ledger), message="the job to see its key")

    os.kill(attempt.pid, signal.SIGKILL)
    run = succeeded(run)

    assert (run.attempt, run.lost_attempts) == (2, 1)
    key = key_of(job, run.scheduled_for)
    assert keys_seen(ledger) == [(key, 1, run.pk), (key, 2, run.pk)]


@pytest.mark.timeout(120)
def test_a_workflow_re_run_runs_the_failed_step_again_with_its_first_key(processes, ledger, tmp_path):
    marker = tmp_path / "b-is-broken"
    marker.touch()
    first_job = keys_job("a", path=ledger.path)
    failing = keys_job("b", max_retries=0, path=ledger.path, marker=str(marker))
    workflow = make_workflow("a-then-b", "ab", [("a", "b")])
    processes.worker(concurrency=2)

    def finished(wf_run):
        wait_for(lambda: wf_run.refresh_from_db() or wf_run.is_terminal, timeout=60,
                 message=f"workflow run #{wf_run.pk} to end")
        return wf_run

    first = finished(progress.start(workflow))
    second = finished(progress.rerun(first))  # b fails again: a re-run of a re-run follows
    marker.unlink()
    third = finished(progress.rerun(second))

    assert [first.status, second.status, third.status] == ["failed", "failed", WorkflowRunStatus.SUCCEEDED]
    b_runs = [wf_run.steps.get(job=failing).run for wf_run in (first, second, third)]
    assert len({run.pk for run in b_runs}) == 3  # three runs of b, each its own slot
    b_key = key_of(failing, b_runs[0].scheduled_for)
    a_run = first.steps.get(job=first_job).run
    assert keys_seen(ledger) == [(key_of(first_job, a_run.scheduled_for), 1, a_run.pk)] + [
        (b_key, 1, run.pk) for run in b_runs]
    assert api_key(b_runs[2]) == b_key


@pytest.mark.timeout(90)
def test_two_slots_of_a_job_have_their_own_keys_in_a_commands_environment(processes):
    job = save_job(Job(name="hourly", kind="command", target='echo "$JOB_IDEMPOTENCY_KEY $JOB_ATTEMPT"'),
                   {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    slots = [hour, hour + timedelta(hours=1)]
    processes.worker(concurrency=1)

    found = actions.backfill(actions.Actor.command_line(), job, slots[0], slots[1] + timedelta(minutes=30))
    assert len(found.created) == 2
    runs = [succeeded(run) for run in JobRun.objects.filter(pk__in=found.created).order_by("scheduled_for")]

    assert [run.output.strip() for run in runs] == [f"{key_of(job, slot)} 1" for slot in slots]
    assert [api_key(run) for run in runs] == [key_of(job, slot) for slot in slots]
