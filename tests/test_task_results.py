"""What django-celery-results keeps, through a real worker, as docs/reference/guarantees.md says: a Celery
task of the user's own, sent as Celery sends it, keeps its `TaskResult` row; a job's run keeps none (its
`JobRun` and `JobAttempt` rows are its record) unless JOBS_TASK_RESULTS=true, which keeps one per attempt,
named `run-<id>-<attempt>` as retention deletes it."""

import json

import pytest
from django_celery_results.models import TaskResult

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.execution import publishing
from jobs.models import Job, JobRun, RunStatus

from .conftest import wait_for
from .jobfuncs import add


def succeeded(run):
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message=f"run {run.pk} to end")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def sum_job():
    return save_job(Job(name="sum", kind="task", target="tests.add", args=[2, 3]), {"type": "manual"})


@pytest.mark.timeout(90)
def test_a_users_celery_task_keeps_its_result_and_a_run_keeps_none(processes):
    processes.worker(concurrency=1)

    sent = add.delay(20, 22)  # the user's code sending its task, as before it had jobs
    row = wait_for(lambda: TaskResult.objects.filter(task_id=sent.id, status="SUCCESS").first(), timeout=40,
                   message="the task's result row")
    run = succeeded(lifecycle.create_run(sum_job()))

    assert (row.task_name, json.loads(row.result)) == ("tests.add", 42)
    assert sent.get(timeout=10) == 42  # read back through the result backend
    assert run.result == 5
    assert not TaskResult.objects.filter(task_id__startswith="run-").exists()


@pytest.fixture
def task_results(settings):
    """JOBS_TASK_RESULTS=true on the scheduler's side: this thread's publisher made its messages' headers under
    the setting before, and makes them again after."""
    settings.JOBS_TASK_RESULTS = True
    publishing.forget()
    yield
    publishing.forget()


@pytest.mark.timeout(90)
def test_with_jobs_task_results_each_attempt_keeps_a_row_named_after_it(processes, task_results):
    processes.worker(concurrency=1, JOBS_TASK_RESULTS="true")

    run = succeeded(lifecycle.create_run(sum_job()))

    row = wait_for(lambda: TaskResult.objects.filter(task_id=f"run-{run.pk}-1", status="SUCCESS").first(),
                   timeout=20, message="the attempt's result row")
    assert row.task_name == "jobs.execute_run"
    assert json.loads(row.result) == {"run_id": run.pk, "attempt": 1, "result": 5}
