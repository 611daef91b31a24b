"""A job kind added as a deployment would add one, one package (tests/echo_kind) and its line in
JOBS_KINDS, and nothing else: the API, the job form, the admin and a jobs file offer it and check a
job of it with its own rules, and a real worker runs it."""

import re
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from jobs import kinds, lifecycle
from jobs.models import Job, RunStatus
from notifications import channels

from .api_personas import browser, make_personas
from .conftest import wait_for
from .test_job_forms import form_of, submit
from .test_notifications_kinds import KINDS as CHANNEL_KINDS

KINDS = [*kinds.DEFAULT_KINDS, "tests.echo_kind"]


@pytest.fixture
def echo_kind(settings):
    settings.JOBS_KINDS = KINDS


@pytest.mark.django_db
def test_the_api_creates_a_job_of_the_added_kind_and_refuses_a_bad_one_naming_the_field(echo_kind):
    people = make_personas()
    api = people.client(people.owner)

    created = api.post("/api/jobs/", {"name": "greeting", "kind": "echo", "target": "hello",
                                      "kwargs": {"prefix": "> "}}, format="json")
    refused = api.post("/api/jobs/", {"name": "silent", "kind": "echo", "target": "one\ntwo"}, format="json")

    assert created.status_code == 201, created.json()
    assert created.json()["kind"] == "echo" and Job.objects.get(name="greeting").kwargs == {"prefix": "> "}
    assert refused.status_code == 400
    assert refused.json() == {"target": ["An echo job prints one line: give it as the target."]}
    assert not Job.objects.filter(name="silent").exists()
    listed = api.get("/api/jobs/", {"kind": "echo"}).json()
    assert [job["name"] for job in listed["results"]] == ["greeting"]


@pytest.mark.django_db
def test_without_its_line_in_the_setting_the_kind_is_refused():
    people = make_personas()

    refused = people.client(people.owner).post("/api/jobs/", {"name": "greeting", "kind": "echo",
                                                              "target": "hello"}, format="json")

    assert refused.status_code == 400 and refused.json() == {"kind": ['"echo" is not a valid choice.']}


@pytest.mark.django_db
def test_the_job_form_offers_the_added_kind_with_its_fields_and_saves_a_job_of_it(echo_kind):
    people = make_personas()
    client = browser(people.owner)
    page = client.get("/jobs/new/").content.decode()
    assert '<option value="echo">Echo a line</option>' in page
    # kwargs belongs to three kinds: shown once, for all of them.
    assert '<fieldset class="kind-fields" data-kind="callable task echo">' in page
    assert "<legend>Registered function, Celery task and Echo a line only</legend>" in page
    assert page.count('name="kwargs-key"') == 1

    response = submit(client, "/jobs/new/", form_of(client, "/jobs/new/"), name="greeting", kind="echo",
                      target="hello", **{"kwargs-key": ["prefix"], "kwargs-value": ["> "]})
    refused = submit(client, "/jobs/new/", form_of(client, "/jobs/new/"), name="silent", kind="echo", target="one\ntwo")

    job = Job.objects.get(name="greeting")
    assert response.status_code == 302 and (job.kind, job.target, job.kwargs) == ("echo", "hello", {"prefix": "> "})
    assert refused.status_code == 400 and not Job.objects.filter(name="silent").exists()
    edit = form_of(client, f"/jobs/{job.pk}/edit/")
    assert edit["kind"] == ["echo"] and edit["kwargs-key"] == ["prefix", ""]


@pytest.mark.django_db
def test_the_admin_offers_the_added_kind_with_its_fields(echo_kind, admin_client):
    form = admin_client.get("/admin/jobs/job/add/").content.decode()

    assert '<option value="echo">Echo a line</option>' in form
    assert "Registered function, Celery task and Echo a line only" in form and form.count('name="kwargs"') == 1
    response = admin_client.post("/admin/jobs/job/add/", {
        "name": "greeting", "kind": "echo", "target": "one\ntwo", "args": "[]", "kwargs": "{}", "tags": "[]",
        "environment": "{}", "secret_environment": "{}", "http_headers": "{}", "secret_http_headers": "{}",
        "http_ok_statuses": "[]", "schedule_type": "manual", "catchup_policy": "latest", "catchup_max": 10,
        "overlap_policy": "allow", "jitter_seconds": 0, "priority": 5, "max_retries": 0, "retry_backoff_seconds": 10,
        "retry_backoff_max_seconds": 600, "timeout_seconds": 60, "enabled": "on"})
    assert response.status_code == 200 and "An echo job prints one line" in response.content.decode()
    assert not Job.objects.filter(name="greeting").exists()


@pytest.mark.django_db
def test_a_jobs_file_applies_and_exports_a_job_of_the_added_kind(echo_kind, tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n- name: greeting\n  kind: echo\n  target: hello\n  kwargs: {prefix: '> '}\n"
                    "  schedule: {type: manual}\n- name: silent\n  kind: echo\n  target: \"one\\ntwo\"\n"
                    "  schedule: {type: manual}\n")
    out = StringIO()

    with pytest.raises(CommandError, match="An echo job prints one line"):
        call_command("jobs", "apply", str(path), stdout=out, stderr=out)
    assert not Job.objects.exists()

    path.write_text("\n".join(path.read_text().splitlines()[:6]) + "\n")
    call_command("jobs", "apply", str(path), stdout=out, stderr=out)

    assert out.getvalue().splitlines()[-1] == "applied: 1 created, 0 updated, 0 deleted.", out.getvalue()
    job = Job.objects.get(name="greeting")
    assert (job.kind, job.target, job.kwargs) == ("echo", "hello", {"prefix": "> "})
    exported = tmp_path / "exported.yaml"
    call_command("jobs", "export", str(exported), stdout=StringIO())
    assert "kind: echo" in exported.read_text()


def test_a_real_worker_runs_a_job_of_the_added_kind(echo_kind, processes):
    job = Job(name="greeting", kind="echo", target="hello", kwargs={"prefix": "> "})
    job.full_clean()
    job.save()
    processes.worker(JOBS_KINDS=",".join(KINDS))

    run = lifecycle.create_run(job)
    wait_for(lambda: Job.objects.get(pk=job.pk).runs.get(pk=run.pk).is_terminal, timeout=40,
             message="the echo run to finish")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == "> hello\n" and run.result == {"echoed": "> hello"}


# The kinds of jobs and of notification channels are loaded alike (jobs.kinds.registered).
@pytest.mark.parametrize("setting, listed, loaded, path, says", [
    ("JOBS_KINDS", KINDS, kinds.kinds, "tests.jobfuncs", "tests.jobfuncs exports no KIND (a JobKindSpec)"),
    ("JOBS_KINDS", KINDS, kinds.kinds, "tests.echo_kind", "tests.echo_kind: the kind's name 'echo' is taken"),
    ("NOTIFICATION_CHANNEL_KINDS", CHANNEL_KINDS, channels.kinds, "tests.jobfuncs",
     "tests.jobfuncs exports no CHANNEL (a ChannelKindSpec)"),
    ("NOTIFICATION_CHANNEL_KINDS", CHANNEL_KINDS, channels.kinds, "tests.log_channel",
     "tests.log_channel: the kind's name 'log' is taken"),
])
def test_a_misconfigured_kind_list_is_refused_naming_the_package(settings, setting, listed, loaded, path, says):
    setattr(settings, setting, [*listed, path])

    with pytest.raises(ImproperlyConfigured, match=re.escape(says)):
        loaded()
