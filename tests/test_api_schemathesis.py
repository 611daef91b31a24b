"""Property-based requests against every operation of the API's OpenAPI schema: whatever a staff
user sends, the answer is never a 5xx. Runs in-process through WSGI against the test database;
no worker is started and nothing is published (runs are published on commit, and the test's
transaction never commits).

schemathesis' own pytest loader (``schemathesis.pytest.from_fixture``) fails on pytest 9, and the
schema endpoint needs an authenticated user, hence a database, so the schema is loaded inside the
test and each operation is driven with its Hypothesis strategy here."""

import traceback

import pytest
import schemathesis
from django.contrib.auth.models import Group
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from jobs.access import tokens as api_tokens
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, TeamQuota
from notifications.models import Channel, Rule
from scheduler_site.wsgi import application
from workflows.definitions import parse_graph, save_workflow
from workflows.models import Workflow, WorkflowRun

EXAMPLES = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture
def in_test_transaction():
    """Keep the test's connection open across requests to the WSGI app, as Django's test client
    does: the request signals would close it, since it is inside the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def staff_headers(db, django_user_model):
    staff = django_user_model.objects.create_user("schema-staff", is_staff=True)
    return {"Authorization": f"Token {api_tokens.create(staff)[1]}"}


def strategy_for(operation, existing_id):
    """Generated requests, valid and not, half of them about an object that exists."""
    strategies = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        if "{id}" in operation.path:
            strategies.append(operation.as_strategy(generation_mode=mode, path_parameters={"id": existing_id}))
        strategies.append(operation.as_strategy(generation_mode=mode))
    return st.one_of(strategies)


# Every operation of the schema in one test: 95 s alone on this repository's machine, 175-182 s
# beside two CPU hogs, and over the suite's 300 s in the main pass of a loaded run (pytest-timeout's
# alarm then fired inside a Hypothesis example, which reported it as an "unreliable" example).
@pytest.mark.timeout(900)
def test_it_never_answers_a_staff_request_with_a_server_error(in_test_transaction, staff_headers):
    job = save_job(Job(name="schema-job", kind="callable", target="builtin.noop"), {"type": "manual"})
    run = JobRun.objects.create(job=job, scheduled_for=job.created_at)
    workflow = save_workflow(Workflow(name="schema-workflow"), {"type": "manual"},
                             parse_graph(["schema-job"], [], {"schema-job": job}))
    workflow_run = WorkflowRun.objects.create(workflow=workflow, trigger="manual", scheduled_for=job.created_at)
    # A closed local port: a channel's test call fails at once, and nothing leaves the machine.
    channel = Channel.objects.create(name="schema-channel", kind="webhook", config={"url": "http://127.0.0.1:9/"})
    rule = Rule.objects.create(channel=channel, events=["failed"], scope="job", job=job)
    quota = TeamQuota.objects.create(group=Group.objects.create(name="schema-team"), max_jobs=10)
    ids = {"/api/runs/": run.pk, "/api/workflows/": workflow.pk, "/api/workflow-runs/": workflow_run.pk,
           "/api/channels/": channel.pk, "/api/rules/": rule.pk, "/api/quotas/": quota.pk}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=staff_headers)
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        existing_id = next((pk for prefix, pk in ids.items() if operation.path.startswith(prefix)), job.pk)

        @EXAMPLES
        @given(case=strategy_for(operation, existing_id))
        def check(case):
            # Each request in a savepoint rolled back after it: every request finds the same job and
            # run, and a database error does not abort the rest of the test.
            savepoint = transaction.savepoint()
            try:
                case.call_and_validate(headers=staff_headers, checks=[not_a_server_error])
            finally:
                transaction.savepoint_rollback(savepoint)

        try:
            check()
        except Exception as exc:  # collected to report every failing operation, with what each raised
            failures.append(f"{operation.label}: {exc}" + "".join(
                "\n  " + "".join(traceback.format_exception(sub)) for sub in getattr(exc, "exceptions", ())))
    assert not failures, "\n\n".join(failures)
