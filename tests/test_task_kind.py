"""The `task` kind: a Celery task of the user's own modules (JOBS_CALLABLE_MODULES, here tests.jobfuncs), named
by its registered name, runs inside the job's attempt on a real worker: its result stored, its prints the run's
output while it runs, a bound task seeing the run's idempotency key and attempt on ``self.request``, the job's
timeout and retries. A job that names anything else, or arguments that do not fit the task, is refused when saved."""

from io import StringIO

import pytest
from celery import shared_task
from django.core.management import CommandError, call_command
from django.utils.html import escape

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from .api_personas import browser
from .conftest import wait_for

KEY_LINE = ("key", "idempotency_key", "attempt", "run_id", "retries")


@shared_task(name="tests.outside")
def outside():
    """A Celery task of the user's, in a module JOBS_CALLABLE_MODULES does not list: no job may run it."""


def task_job(name, target, **fields):
    return save_job(Job(name=name, kind="task", target=target, **fields), {"type": "manual"})


def ended(run):
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message=f"run {run.pk} to end")
    run.refresh_from_db()
    return run


def keys_seen(ledger):
    """What tests.keyed read on self.request, attempt by attempt."""
    return [dict(zip(KEY_LINE, line, strict=True)) for line in ledger.lines("key")]


# --- saving a job: the API, the form, the admin


@pytest.mark.django_db
def test_the_api_creates_a_task_job_and_lists_the_tasks_a_job_may_name(people):
    api = people.client(people.owner)

    created = api.post("/api/jobs/", {"name": "sum", "kind": "task", "target": "tests.add", "args": [2, 3]},
                       format="json")
    targets = api.get("/api/jobs/targets/")

    assert created.status_code == 201, created.json()
    assert (created.json()["kind"], Job.objects.get(name="sum").args) == ("task", [2, 3])
    assert targets.status_code == 200
    assert targets.json()["task"] == ["tests.add", "tests.keyed"]  # the Celery tasks of tests.jobfuncs
    assert "test.keys" in targets.json()["callable"] and "command" not in targets.json()
    assert people.client(None).get("/api/jobs/targets/").status_code in (401, 403)


@pytest.mark.django_db
@pytest.mark.parametrize("fields, field, says", [
    ({"args": [1, 2, 3, 4]}, "args", "Does not fit the task tests.add(x, y, path=None): too many positional arguments."),
    ({"args": [1], "kwargs": {"z": 2}}, "kwargs", "got an unexpected keyword argument 'z'"),
    ({"args": [1]}, "kwargs", "missing a required argument: 'y'"),
    ({"args": [1], "parameters": [{"name": "q", "type": "string", "default": "x"}]}, "parameters",
     "got an unexpected keyword argument 'q'"),
    ({"args": {"x": 1}}, "args", "Must be a JSON list."),
])
def test_arguments_that_do_not_fit_the_tasks_signature_are_a_400_naming_the_field(people, fields, field, says):
    refused = people.client(people.owner).post("/api/jobs/", {"name": "misfit", "kind": "task", "target": "tests.add",
                                                              **fields}, format="json")

    assert refused.status_code == 400
    assert list(refused.json()) == [field] and says in refused.json()[field][0]
    assert not Job.objects.filter(name="misfit").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("target, says", [
    ("tests.ad", "No Celery task named 'tests.ad' in JOBS_CALLABLE_MODULES. Tasks a job may run: tests.add, "
                 "tests.keyed."),
    ("__import__('os').system('id')", "No Celery task named '__import__('os').system('id')'"),
    ("x" * 10_000, "No Celery task named 'xxx"),
    # Registered with Celery, but not of JOBS_CALLABLE_MODULES: the user's other code, Celery's and the service's own.
    ("tests.outside", "The Celery task 'tests.outside' is not in a module of JOBS_CALLABLE_MODULES"),
    ("celery.backend_cleanup", "The Celery task 'celery.backend_cleanup' is not in a module of JOBS_CALLABLE_MODULES"),
    ("test.keys", "No Celery task named 'test.keys'"),  # a job function is the callable kind's
])
def test_a_task_no_job_may_run_is_a_400_naming_the_target(people, target, says):
    from celery import current_app

    current_app.loader.import_default_modules()  # the service's own tasks, as a worker has them
    refused = people.client(people.owner).post("/api/jobs/", {"name": "refused", "kind": "task", "target": target},
                                               format="json")

    assert refused.status_code == 400
    assert list(refused.json()) == ["target"] and says in refused.json()["target"][0]
    assert not Job.objects.filter(name="refused").exists()


@pytest.mark.django_db
def test_the_job_form_and_the_admin_offer_the_tasks(people, admin_client):
    page = browser(people.owner).get("/jobs/new/").content.decode()
    admin = admin_client.get("/admin/jobs/job/add/").content.decode()

    assert '<option value="task">Celery task</option>' in page
    assert ('<datalist id="options-target-task"><option value="tests.add"><option value="tests.keyed"></datalist>'
            in page)
    assert '<option value="task">Celery task</option>' in admin
    assert escape("Celery task: tests.add, tests.keyed") in admin


@pytest.mark.django_db
def test_a_jobs_file_applies_a_task_job_and_refuses_one_that_does_not_fit_naming_it(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n- name: sum\n  kind: task\n  target: tests.add\n  args: [2, 3]\n"
                    "- name: misfit\n  kind: task\n  target: tests.add\n  kwargs: {z: 1}\n")

    with pytest.raises(CommandError) as refused:
        call_command("jobs", "apply", str(path), stdout=StringIO(), stderr=StringIO())
    assert "misfit" in str(refused.value) and "got an unexpected keyword argument 'z'" in str(refused.value)
    assert not Job.objects.exists()

    path.write_text("\n".join(path.read_text().splitlines()[:5]) + "\n")
    call_command("jobs", "apply", str(path), stdout=StringIO())
    assert Job.objects.values_list("kind", "target", "args").get() == ("task", "tests.add", [2, 3])


# --- a real worker


@pytest.mark.timeout(90)
def test_a_task_job_runs_on_a_worker_and_stores_its_result_and_output(processes, ledger):
    job = task_job("sum", "tests.add", args=[2, 3], kwargs={"path": ledger.path})
    processes.worker(concurrency=1)

    run = ended(lifecycle.create_run(job))

    assert run.status == RunStatus.SUCCEEDED, run.error
    assert (run.result, run.output) == (5, "adding 2 and 3\n")
    assert ledger.lines("add") == [["add", "2", "3"]]  # ran once, inside the attempt: no message of its own


@pytest.mark.timeout(120)
def test_a_bound_task_sees_the_runs_key_and_attempt_and_a_retry_runs_it_again(processes, ledger):
    job = task_job("keyed", "tests.keyed", args=[ledger.path], kwargs={"fail_times": 1}, max_retries=1,
                   retry_backoff_seconds=0, retry_jitter=False)
    processes.worker(concurrency=1)
    processes.beat()

    run = ended(lifecycle.create_run(job))

    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.attempt == 2
    key = run.idempotency_key
    assert key.startswith(f"{job.pk}:")
    assert keys_seen(ledger) == [
        {"key": "key", "idempotency_key": key, "attempt": "1", "run_id": str(run.pk), "retries": "0"},
        {"key": "key", "idempotency_key": key, "attempt": "2", "run_id": str(run.pk), "retries": "1"},
    ]
    assert run.result == {"key": key, "attempt": 2}
    first = run.attempts.get(number=1)
    assert first.outcome == "failed" and "failing attempt 1 on purpose" in first.error


@pytest.mark.timeout(120)
def test_a_task_past_its_jobs_timeout_is_stopped_and_its_output_seen_while_it_ran(processes, ledger, people):
    job = task_job("slow", "tests.keyed", args=[ledger.path], kwargs={"seconds": 60}, timeout_seconds=3,
                   max_retries=0)
    processes.worker(concurrency=1)
    api = people.client(people.staff)

    run = lifecycle.create_run(job)
    # What the task printed, saved by the attempt's heartbeats while it runs.
    live = wait_for(lambda: (body := api.get(f"/api/runs/{run.pk}/").json()) and body["output"] and body,
                    timeout=40, message="the task's output while it runs")
    run = ended(run)

    assert live["status"] == "running" and live["output"] == "attempt 1 started\n"
    assert run.status == RunStatus.TIMED_OUT
    assert run.error == "Timed out after 3 s"
    assert run.output == "attempt 1 started\n"
    assert not ledger.lines("done")  # stopped before it finished
