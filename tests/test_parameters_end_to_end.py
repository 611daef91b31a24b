"""Parameters reaching job code through real workers: a function's keyword arguments (given at run
now, and a scheduled run's defaults), a command's JOB_PARAM_ environment (a value that is shell
code stays a value), an HTTP call's placeholders against a local server (each encoded for its
place), a backfill's runs and a workflow step's run."""

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from jobs.actions import jobs as actions
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, RunTrigger
from workflows import progress

from .conftest import wait_for
from .test_notifications_support import RecordingHTTPServer
from .workflow_helpers import make_workflow

pytestmark = pytest.mark.timeout(240)

OPERATOR = actions.Actor.command_line()


def ended(run_id, timeout=60):
    def done():
        return JobRun.objects.get(pk=run_id).is_terminal

    wait_for(done, timeout=timeout, message=f"run {run_id} to end")
    return JobRun.objects.get(pk=run_id)


def params_seen(ledger):
    """{run id: {name: [type, text]}} of what test.params received, from its own ledger."""
    return {int(row[1]): json.loads(" ".join(row[2:])) for row in ledger.lines("params")}


def test_a_function_gets_its_values_as_keyword_arguments_over_the_jobs_kwargs(processes, ledger):
    owner = User.objects.create_user("owner")
    job = save_job(Job(name="report", kind="callable", target="test.params", owner=owner,
                       kwargs={"path": ledger.path, "customer": 1, "fixed": "kept"},
                       parameters=[{"name": "day", "type": "date", "required": True},
                                   {"name": "customer", "type": "integer", "default": 5},
                                   {"name": "since", "type": "datetime"},
                                   {"name": "dry", "type": "boolean", "default": False}]), {"type": "manual"})
    processes.worker(concurrency=1)
    client = APIClient()
    client.force_authenticate(owner)

    answer = client.post(f"/api/jobs/{job.pk}/run/", {"params": {"day": "2026-11-01", "customer": "7",
                                                                 "since": "2026-11-01T09:30:00+01:00"}},
                         format="json")
    assert answer.status_code == 202, answer.json()
    run = ended(answer.json()["id"])

    assert run.status == RunStatus.SUCCEEDED, run.error
    assert params_seen(ledger)[run.pk] == {
        "fixed": ["str", "kept"],
        "customer": ["int", "7"],  # the run's value over the job's kwargs
        "day": ["date", "2026-11-01"], "since": ["datetime", "2026-11-01 08:30:00+00:00"], "dry": ["bool", "False"],
    }
    shown = client.get(f"/api/runs/{run.pk}/").json()["params"]
    assert shown == {"day": "2026-11-01", "customer": 7, "since": "2026-11-01T08:30:00+00:00", "dry": False}


def test_a_scheduled_run_gets_the_defaults(processes, ledger):
    job = save_job(Job(name="every-second", kind="callable", target="test.params", kwargs={"path": ledger.path},
                       parameters=[{"name": "region", "type": "choice", "choices": ["eu", "us"], "default": "us"},
                                   {"name": "note", "type": "string"}]),
                   {"type": "interval", "every_seconds": 1})
    processes.worker(concurrency=1)
    processes.beat()

    wait_for(lambda: job.runs.filter(status=RunStatus.SUCCEEDED).exists(), timeout=60, message="a scheduled run")
    Job.objects.filter(pk=job.pk).update(enabled=False)
    run = job.runs.filter(status=RunStatus.SUCCEEDED).first()
    assert run.trigger == RunTrigger.SCHEDULE and run.params == {"region": "us"}
    assert params_seen(ledger)[run.pk] == {"region": ["str", "us"]}


def test_a_command_gets_its_values_in_the_environment_never_in_its_text(processes, tmp_path):
    pwned = [tmp_path / "pwned-1", tmp_path / "pwned-2", tmp_path / "pwned-3"]
    job = save_job(Job(name="export", kind="command",
                       target='printf "%s|%s|%s\\n" "$JOB_PARAM_NOTE" "$JOB_PARAM_DAY" "$JOB_PARAM_LIMIT"',
                       parameters=[{"name": "note", "type": "string"}, {"name": "day", "type": "date"},
                                   {"name": "limit", "type": "integer", "default": 10}]), {"type": "manual"})
    processes.worker(concurrency=1)
    note = f"$(touch {pwned[0]}); echo pwned `touch {pwned[1]}` ; touch {pwned[2]} && rm -rf /"

    run = actions.run_now(OPERATOR, job, {"note": note, "day": "2026-11-01"})
    run = ended(run.pk)

    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == f"{note}|2026-11-01|10\n"
    assert [path.exists() for path in pwned] == [False, False, False]


@pytest.fixture
def endpoint():
    """A local HTTP server recording each request's raw path and body, answering 200."""
    with RecordingHTTPServer() as server:
        yield server


def test_an_http_call_gets_its_values_through_placeholders_encoded_for_their_place(processes, endpoint,
                                                                                    local_http_allowed):
    job = save_job(Job(name="hook", kind="http", http_method="POST",
                       target=endpoint.url + "/reports/{{params.who}}/run?day={{params.day}}&who={{params.who}}",
                       http_body='{"who": {{params.who}}, "limit": {{params.limit}}, "day": {{params.day}}}',
                       parameters=[{"name": "who", "type": "string"}, {"name": "day", "type": "date"},
                                   {"name": "limit", "type": "integer", "default": 3}]), {"type": "manual"})
    processes.worker(concurrency=1)
    who = 'a/b c&day=1999-01-01"}, "x": {"'

    run = ended(actions.run_now(OPERATOR, job, {"who": who, "day": "2026-11-01"}).pk)

    assert run.status == RunStatus.SUCCEEDED, run.error
    [request] = endpoint.requests
    path, query = request["path"].split("?", 1)
    segments = path.split("/")
    assert segments[:2] == ["", "reports"] and segments[3:] == ["run"]  # the value stayed in its one segment
    assert unquote(segments[2]) == who
    assert parse_qs(urlsplit(request["path"]).query) == {"day": ["2026-11-01"], "who": [who]}
    assert json.loads(request["body"]) == {"who": who, "limit": 3, "day": "2026-11-01"}
    assert "&day=1999" not in query


def test_backfill_runs_each_slot_with_the_values(processes, ledger):
    job = save_job(Job(name="daily", kind="callable", target="test.params", kwargs={"path": ledger.path},
                       parameters=[{"name": "customer", "type": "integer", "default": 1}]),
                   {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"})
    processes.worker(concurrency=2)
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)

    found = actions.backfill(OPERATOR, job, start, start + timedelta(days=2), params={"customer": "42"})
    runs = [ended(run_id) for run_id in found.created]

    assert len(runs) == 2 and {run.status for run in runs} == {RunStatus.SUCCEEDED}
    assert {run.trigger for run in runs} == {RunTrigger.BACKFILL}
    seen = params_seen(ledger)
    assert [seen[run.pk]["customer"] for run in runs] == [["int", "42"], ["int", "42"]]


def test_a_workflow_step_runs_its_job_with_the_steps_values(processes, ledger):
    for name in ("extract", "load"):
        save_job(Job(name=name, kind="callable", target="test.params", kwargs={"path": ledger.path},
                     parameters=[{"name": "day", "type": "date", "default": "2026-01-01"},
                                 {"name": "customer", "type": "integer"}]), {"type": "manual"})
    workflow = make_workflow("nightly", ["extract", "load"], [("extract", "load")])
    staff = User.objects.create_user("boss", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    refused = client.patch(f"/api/workflows/{workflow.pk}/", {"params": {"load": {"day": "tomorrow"}}}, format="json")
    assert refused.status_code == 400 and "load: params.day: day must be a date" in refused.json()["params"][0]
    answer = client.patch(f"/api/workflows/{workflow.pk}/", {"params": {"load": {"day": "2026-11-01", "customer": "9"}}},
                          format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["params"] == {"load": {"day": "2026-11-01", "customer": 9}}
    processes.worker(concurrency=1)

    wf_run = progress.start(workflow)
    wait_for(lambda: (wf_run.refresh_from_db() or wf_run.is_terminal), timeout=60, message="the workflow run")

    assert wf_run.status == "succeeded"
    runs = {step.job.name: step.run for step in wf_run.steps.select_related("job", "run")}
    assert runs["extract"].params == {"day": "2026-01-01"}
    assert runs["load"].params == {"day": "2026-11-01", "customer": 9}
    seen = params_seen(ledger)
    assert seen[runs["load"].pk]["day"] == ["date", "2026-11-01"] and seen[runs["load"].pk]["customer"] == ["int", "9"]
    assert "customer" not in seen[runs["extract"].pk]


def test_a_step_whose_values_no_longer_fit_is_skipped_with_the_reason(transactional_db):
    save_job(Job(name="load", kind="callable", target="builtin.echo",
                 parameters=[{"name": "region", "type": "choice", "choices": ["eu", "us"]}]), {"type": "manual"})
    workflow = make_workflow("regional", ["load"], [])
    workflow.nodes.update(params={"region": "eu"})
    job = Job.objects.get(name="load")  # "eu" is no longer a choice
    job.parameters = [{"name": "region", "type": "choice", "choices": ["us"]}]
    save_job(job)

    wf_run = progress.start(workflow)

    step = wf_run.steps.get()
    assert step.status == "skipped" and "region must be one of us" in step.reason
    assert not JobRun.objects.exists()
