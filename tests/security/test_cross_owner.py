"""Another owner's objects: an outsider (another group) neither reads nor acts on the owner's jobs,
runs, workflows and workflow runs (404, so ids do not tell what exists), through the API, the pages
and the command line; channels, rules and the audit trail are for staff with the permission."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit import trail
from audit.models import Source
from jobs.models import Job, JobRun
from notifications.models import Channel, Rule
from workflows.models import Workflow, WorkflowRun

from ..work_trail import work_entries


@pytest.fixture
def theirs(people, owned_job, owned_run):
    workflow = Workflow.objects.create(name="owners-flow", owner=people.owner, group=people.team)
    workflow.nodes.create(job=owned_job)
    wf_run = WorkflowRun.objects.create(workflow=workflow, scheduled_for=owned_run.scheduled_for, status="failed")
    trail.record(owned_job, "create", Source.API, user=people.owner, actor_name=people.owner.username)
    channel = Channel.objects.create(name="ops", kind="webhook", config={"url": "https://example.invalid/"})
    Rule.objects.create(channel=channel, events=["failed"])
    return {"job": owned_job, "run": owned_run, "workflow": workflow, "wf_run": wf_run, "channel": channel}


def state(objects):
    job = Job.objects.get(pk=objects["job"].pk)
    return (job.description, job.enabled, job.next_run_at, JobRun.objects.count(), JobRun.objects.get(
        pk=objects["run"].pk).status, Workflow.objects.get().enabled, WorkflowRun.objects.count(),
        work_entries().count(), Channel.objects.get().enabled)


API_ATTEMPTS = [
    ("get", "/api/jobs/{job}/", None), ("patch", "/api/jobs/{job}/", {"description": "mine"}),
    ("delete", "/api/jobs/{job}/", None), ("post", "/api/jobs/{job}/run/", None),
    ("post", "/api/jobs/{job}/pause/", None), ("get", "/api/jobs/{job}/slots/", None),
    ("post", "/api/jobs/{job}/backfill/", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}),
    ("get", "/api/runs/{run}/", None), ("post", "/api/runs/{run}/cancel/", None),
    ("get", "/api/workflows/{workflow}/", None), ("patch", "/api/workflows/{workflow}/", {"enabled": False}),
    ("delete", "/api/workflows/{workflow}/", None), ("post", "/api/workflows/{workflow}/run/", None),
    ("get", "/api/workflow-runs/{wf_run}/", None), ("post", "/api/workflow-runs/{wf_run}/rerun/", None),
    ("post", "/api/workflow-runs/{wf_run}/cancel/", None),
]


def ids(objects):
    return {name: obj.pk for name, obj in objects.items()}


@pytest.mark.parametrize("method, url, body", API_ATTEMPTS, ids=[f"{m} {u}" for m, u, _ in API_ATTEMPTS])
def test_an_outsider_gets_404_from_the_api(people, theirs, method, url, body):
    before = state(theirs)
    response = getattr(people.api(people.outsider), method)(url.format(**ids(theirs)), body, format="json")
    assert response.status_code == 404
    assert state(theirs) == before


@pytest.mark.parametrize("url", ["/api/jobs/", "/api/runs/", "/api/workflows/", "/api/workflow-runs/",
                                 "/api/runs/?job={job}", "/api/workflow-runs/?workflow={workflow}"])
def test_an_outsiders_lists_are_empty(people, theirs, url):
    assert people.api(people.outsider).get(url.format(**ids(theirs))).json()["results"] == []


PAGE_ATTEMPTS = [
    ("get", "/jobs/{job}/"), ("get", "/jobs/{job}/slots/"), ("get", "/jobs/{job}/backfill/"),
    ("post", "/jobs/{job}/run/"), ("post", "/jobs/{job}/pause/"), ("post", "/jobs/{job}/backfill/"),
    ("get", "/runs/{run}/"), ("get", "/runs/{run}/tail/"), ("post", "/runs/{run}/cancel/"),
    ("get", "/workflows/{workflow}/"), ("post", "/workflows/{workflow}/run/"),
    ("post", "/workflow-runs/{wf_run}/rerun/"), ("post", "/workflow-runs/{wf_run}/cancel/"),
    ("get", "/channels/"), ("post", "/channels/{channel}/test/"),
]


@pytest.mark.parametrize("method, url", PAGE_ATTEMPTS, ids=[f"{m} {u}" for m, u in PAGE_ATTEMPTS])
def test_an_outsider_gets_404_from_the_pages(client, people, theirs, method, url):
    before = state(theirs)
    client.force_login(people.outsider)
    assert getattr(client, method)(url.format(**ids(theirs))).status_code == 404
    assert state(theirs) == before


def test_the_lists_on_the_pages_leave_their_objects_out(client, people, theirs):
    client.force_login(people.outsider)
    for url in ("/", "/jobs/", "/runs/", "/workflows/"):
        page = client.get(url).content.decode()
        assert "owners-job" not in page and "owners-flow" not in page, url


@pytest.mark.parametrize("model", ["jobs/job", "jobs/jobrun", "workflows/workflow", "workflows/workflowrun",
                                   "notifications/channel", "notifications/rule", "notifications/delivery",
                                   "audit/auditentry", "django_celery_beat/periodictask", "auth/user"])
def test_the_admin_is_closed_to_staff_without_the_models_permission(client, people, theirs, model):
    client.force_login(people.staff)
    assert client.get(f"/admin/{model}/").status_code == 403
    client.force_login(people.outsider)  # not staff: the admin's login page
    assert client.get(f"/admin/{model}/")["Location"].startswith("/admin/login/")


@pytest.mark.parametrize("action", ["show", "run", "pause", "resume", "slots"])
def test_the_command_line_as_an_outsider_does_not_find_their_job(people, theirs, action):
    before = state(theirs)
    with pytest.raises(CommandError, match="No job named 'owners-job'"):
        call_command("jobs", "--as", "outsider", action, "owners-job", stdout=StringIO())
    assert state(theirs) == before


def test_the_command_line_as_an_outsider_exports_and_applies_only_their_own(people, theirs, tmp_path):
    out = StringIO()
    call_command("jobs", "--as", "outsider", "export", "-", stdout=out)
    assert "owners-job" not in out.getvalue() and "owners-flow" not in out.getvalue()
    path = tmp_path / "take.yaml"
    path.write_text("jobs:\n- name: owners-job\n  kind: callable\n  target: builtin.fail\n")
    with pytest.raises(CommandError, match="name: job with this name already exists"):
        call_command("jobs", "--as", "outsider", "apply", str(path), stdout=StringIO())
    path.write_text("jobs:\n- name: mine\n  kind: callable\n  target: builtin.noop\n"
                    "workflows:\n- name: owners-flow\n  nodes: [mine]\n  edges: []\n")
    with pytest.raises(CommandError, match="not yours to change"):
        call_command("jobs", "--as", "outsider", "apply", str(path), stdout=StringIO())
    prune = tmp_path / "prune.yaml"
    prune.write_text("jobs: []\n")
    call_command("jobs", "--as", "outsider", "apply", "--prune", str(prune), stdout=StringIO())
    assert Job.objects.get(pk=theirs["job"].pk).target == "builtin.noop"


def test_the_owner_and_a_teammate_do_see_them(people, theirs):
    """The control: the same calls answer the owner's group."""
    for user in (people.owner, people.teammate):
        assert people.api(user).get(f"/api/jobs/{theirs['job'].pk}/").status_code == 200
        assert people.api(user).get(f"/api/workflow-runs/{theirs['wf_run'].pk}/").status_code == 200
