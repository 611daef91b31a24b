"""A workflow run's progress, driven in-process through the same calls a worker makes (claim, then
record the outcome) against the real database: which steps start, which are skipped, how the
workflow run ends. The tests with real workers are in test_workflows_workers.py."""

import pytest

from jobs import lifecycle
from jobs.models import JobRun, RunStatus, RunTrigger
from workflows import progress
from workflows.models import StepStatus, WorkflowRun, WorkflowRunStatus

from .workflow_helpers import make_job, make_workflow

pytestmark = pytest.mark.django_db

DIAMOND = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def diamond(**fields):
    for name in "abcd":
        make_job(name, kwargs={"path": "/dev/null"})
    return make_workflow("diamond", "abcd", DIAMOND, **fields)


def steps(wf_run):
    return {s.job.name: s.status for s in wf_run.steps.select_related("job")}


def step_run(wf_run, name):
    return wf_run.steps.get(job__name=name).run


def succeed(wf_run, name):
    run = step_run(wf_run, name)
    assert lifecycle.claim(run.pk, run.attempt, "w", 1)
    lifecycle.record_success(run.pk, run.attempt)


def fail(wf_run, name):
    run = step_run(wf_run, name)
    assert lifecycle.claim(run.pk, run.attempt, "w", 1)
    lifecycle.record_failure(run.pk, run.attempt, "boom")


def test_it_starts_only_the_roots_first():
    wf_run = progress.start(diamond())
    assert steps(wf_run) == {"a": "active", "b": "waiting", "c": "waiting", "d": "waiting"}
    run = step_run(wf_run, "a")
    assert (run.status, run.trigger) == (RunStatus.QUEUED, RunTrigger.WORKFLOW)


def test_it_starts_the_join_once_after_both_upstreams():
    wf_run = progress.start(diamond())
    succeed(wf_run, "a")
    assert steps(wf_run) == {"a": "succeeded", "b": "active", "c": "active", "d": "waiting"}
    succeed(wf_run, "b")
    assert steps(wf_run)["d"] == "waiting"
    succeed(wf_run, "c")
    assert steps(wf_run)["d"] == "active"
    succeed(wf_run, "d")
    wf_run.refresh_from_db()
    assert wf_run.status == WorkflowRunStatus.SUCCEEDED
    assert JobRun.objects.filter(job__name="d").count() == 1


def test_a_failed_upstream_skips_the_downstream_and_fails_the_run():
    wf_run = progress.start(diamond())
    succeed(wf_run, "a")
    fail(wf_run, "b")
    succeed(wf_run, "c")
    wf_run.refresh_from_db()
    assert steps(wf_run) == {"a": "succeeded", "b": "failed", "c": "succeeded", "d": "skipped"}
    assert wf_run.steps.get(job__name="d").reason == "upstream b failed"
    assert wf_run.steps.get(job__name="b").reason == "boom"
    assert wf_run.status == WorkflowRunStatus.FAILED
    assert wf_run.reason == "failed: b"


def test_an_edge_with_on_failure_run_runs_the_downstream_anyway():
    for name in "ab":
        make_job(name)
    wf_run = progress.start(make_workflow("cleanup", "ab", [("a", "b", "run")]))
    fail(wf_run, "a")
    assert steps(wf_run)["b"] == "active"
    succeed(wf_run, "b")
    wf_run.refresh_from_db()
    assert wf_run.status == WorkflowRunStatus.FAILED  # a step failed, even though b ran


def test_a_rerun_keeps_the_succeeded_steps_and_runs_the_failed_one_and_downstream():
    wf_run = progress.start(diamond())
    succeed(wf_run, "a")
    fail(wf_run, "b")
    succeed(wf_run, "c")
    again = progress.rerun(WorkflowRun.objects.get(pk=wf_run.pk))
    assert steps(again) == {"a": "succeeded", "b": "active", "c": "succeeded", "d": "waiting"}
    assert step_run(again, "a") == step_run(wf_run, "a")
    succeed(again, "b")
    succeed(again, "d")
    again.refresh_from_db()
    assert again.status == WorkflowRunStatus.SUCCEEDED
    assert JobRun.objects.filter(job__name="a").count() == 1
    with pytest.raises(progress.NotRerunnable):
        progress.rerun(WorkflowRun.objects.get(pk=wf_run.pk))


def test_a_second_rerun_of_the_same_run_is_fenced_by_the_database():
    wf_run = progress.start(diamond())
    fail(wf_run, "a")
    wf_run.refresh_from_db()
    assert progress.start(wf_run.workflow, "rerun", rerun_of=wf_run) is not None
    assert progress.start(wf_run.workflow, "rerun", rerun_of=wf_run) is None  # as when two raced past the check
    assert WorkflowRun.objects.filter(rerun_of=wf_run).count() == 1


def test_a_running_workflow_run_cannot_be_rerun():
    wf_run = progress.start(diamond())
    with pytest.raises(progress.NotRerunnable):
        progress.rerun(wf_run)


def test_cancel_cancels_the_active_steps_and_never_starts_the_rest():
    wf_run = progress.start(diamond())
    succeed(wf_run, "a")
    assert progress.cancel(wf_run)
    wf_run.refresh_from_db()
    assert wf_run.status == WorkflowRunStatus.CANCELLED
    assert steps(wf_run) == {"a": "succeeded", "b": "cancelled", "c": "cancelled", "d": "cancelled"}
    assert step_run(wf_run, "b").status == RunStatus.CANCELLED
    assert not progress.cancel(wf_run)


def test_a_step_run_the_monitor_gives_up_on_fails_the_step():
    make_job("a", max_retries=0, max_lost_attempts=0)
    make_job("b")
    wf_run = progress.start(make_workflow("lost", "ab", [("a", "b")]))
    run = step_run(wf_run, "a")
    lifecycle.claim(run.pk, run.attempt, "w", 1)
    lifecycle.record_failure(run.pk, run.attempt, "Lost: no heartbeat", lost=True)
    wf_run.refresh_from_db()
    assert step_run(wf_run, "a").status == RunStatus.LOST
    assert steps(wf_run) == {"a": "failed", "b": "skipped"}
    assert wf_run.status == WorkflowRunStatus.FAILED


def test_a_retried_step_stays_active_until_its_last_attempt():
    make_job("a", max_retries=1, retry_backoff_seconds=0)
    wf_run = progress.start(make_workflow("retry", "a", []))
    fail(wf_run, "a")
    assert steps(wf_run) == {"a": StepStatus.ACTIVE}
    lifecycle.queue_due_retries()
    succeed(wf_run, "a")
    wf_run.refresh_from_db()
    assert wf_run.status == WorkflowRunStatus.SUCCEEDED


def test_the_same_job_in_two_workflow_runs_at_once_gets_two_runs():
    workflow = diamond()
    first, second = progress.start(workflow), progress.start(workflow)
    assert step_run(first, "a") != step_run(second, "a")
    assert JobRun.objects.filter(job__name="a").count() == 2


def test_the_scheduler_starts_one_run_per_due_slot(django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from workflows.dispatch import dispatch_due_workflows
    from workflows.models import Workflow

    workflow = diamond()
    slot = timezone.now() - timedelta(seconds=1)
    Workflow.objects.filter(pk=workflow.pk).update(next_run_at=slot)
    assert dispatch_due_workflows() == 1
    assert dispatch_due_workflows() == 0
    workflow.refresh_from_db()
    assert workflow.runs.get().trigger == "schedule"
    assert workflow.next_run_at is None  # a manual workflow has no next slot

    # A second scheduler (or one restarted) that still sees the same slot due: the one-run-per-slot
    # constraint, not next_run_at, is what refuses it.
    Workflow.objects.filter(pk=workflow.pk).update(next_run_at=slot)
    assert dispatch_due_workflows() == 0
    assert workflow.runs.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_upstreams_recorded_at_the_same_moment_by_two_threads_start_d_once(redis_client):
    """The race without workers: B's and C's successes committed by two connections at once."""
    import threading

    from django.db import connection

    workflow = diamond()
    for _ in range(10):
        wf_run = progress.start(workflow)
        succeed(wf_run, "a")
        b, c = step_run(wf_run, "b"), step_run(wf_run, "c")
        for run in (b, c):
            lifecycle.claim(run.pk, run.attempt, "w", 1)
        gate = threading.Barrier(2)

        def finish(run, gate=gate):
            try:
                gate.wait()
                lifecycle.record_success(run.pk, run.attempt)
            finally:
                connection.close()

        threads = [threading.Thread(target=finish, args=(run,)) for run in (b, c)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert steps(wf_run) == {"a": "succeeded", "b": "succeeded", "c": "succeeded", "d": "active"}
    assert JobRun.objects.filter(job__name="d").count() == 10
