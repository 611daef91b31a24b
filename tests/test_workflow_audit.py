"""Workflow actions in the audit trail: create, change, run, pause, resume, cancel, re-run and delete
each write one entry (subject ``workflow``) naming who acted and through which interface, from the
API, the pages and ``manage.py workflows``; a refused action writes none."""

import socket
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from jobs.definitions.jobs import save_job
from jobs.models import Job
from workflows.models import Workflow, WorkflowRun

from .api_personas import make_personas
from .work_trail import work_entries

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    personas = make_personas()
    for name in ("extract", "load"):
        save_job(Job(name=name, kind="callable", target="builtin.noop", owner=personas.owner, group=personas.team),
                 {"type": "manual"})
    return personas


ETL = {"name": "etl", "nodes": ["extract", "load"], "edges": [{"from": "extract", "to": "load"}], "group": "team"}


class Trail:
    """The entries written since the last look."""

    def __init__(self):
        self.seen = 0

    def new(self):
        entries = list(work_entries().order_by("id")[self.seen:])
        self.seen += len(entries)
        return [(e.subject, e.job_name, e.action, e.source, e.actor_id, e.actor_name) for e in entries]


def test_each_workflow_action_through_the_api_writes_one_entry(people):
    api, trail, owner = people.client(people.owner), Trail(), people.owner

    def entry(action):
        return [("workflow", "etl", action, "api", owner.pk, "owner")]

    created = api.post("/api/workflows/", ETL, format="json")
    assert created.status_code == 201, created.json()
    workflow = created.json()["id"]
    assert trail.new() == entry("create")
    assert work_entries().get(action="create").changes["nodes"] == [None, ["extract", "load"]]

    assert api.patch(f"/api/workflows/{workflow}/", {"description": "nightly"}, format="json").status_code == 200
    assert trail.new() == entry("change")
    assert work_entries().get(action="change").changes == {"description": ["", "nightly"]}

    for action, call in (("pause", "pause"), ("resume", "resume"), ("run_now", "run")):
        assert api.post(f"/api/workflows/{workflow}/{call}/").status_code in (200, 202)
        assert trail.new() == entry(action)

    wf_run = WorkflowRun.objects.get()
    assert api.post(f"/api/workflow-runs/{wf_run.pk}/cancel/").json()["detail"] == "Cancelled."
    assert trail.new() == entry("cancel")
    assert api.post(f"/api/workflow-runs/{wf_run.pk}/cancel/").status_code == 200  # already cancelled
    assert trail.new() == []

    assert api.post(f"/api/workflow-runs/{wf_run.pk}/rerun/").status_code == 202
    assert trail.new() == entry("rerun")
    assert api.post(f"/api/workflow-runs/{wf_run.pk}/rerun/").status_code == 409  # already re-run
    assert trail.new() == []

    assert api.delete(f"/api/workflows/{workflow}/").status_code == 204
    assert trail.new() == entry("delete")


def test_each_workflow_action_through_the_command_writes_one_entry(people):
    people.client(people.owner).post("/api/workflows/", ETL, format="json")
    trail = Trail()
    trail.new()

    def command(*args):
        call_command("workflows", *args, stdout=StringIO())
        return [(subject, name, action, source, actor) for subject, name, action, source, actor, _ in trail.new()]

    def entry(action):
        return [("workflow", "etl", action, "cli", None)]

    assert command("run", "etl") == entry("run_now")
    wf_run = WorkflowRun.objects.get()
    assert command("pause", "etl") == entry("pause")
    assert Workflow.objects.get().enabled is False
    assert command("resume", "etl") == entry("resume")
    assert command("cancel", str(wf_run.pk)) == entry("cancel")
    assert command("rerun", str(wf_run.pk)) == entry("rerun")
    with pytest.raises(CommandError, match="already re-run"):
        command("rerun", str(wf_run.pk))
    assert trail.new() == []
    assert command("--as", "owner", "pause", "etl") == [("workflow", "etl", "pause", "cli", people.owner.pk)]

    cli_entries = work_entries().filter(source="cli")
    assert {e.remote_addr for e in cli_entries} == {socket.gethostname()}
    assert all("(OS user)" in e.actor_name for e in cli_entries)
    assert cli_entries.get(actor=people.owner).actor_name.startswith("owner (")


def test_running_a_workflow_from_its_page_writes_one_entry(people):
    people.client(people.owner).post("/api/workflows/", ETL, format="json")
    trail = Trail()
    trail.new()
    browser = Client()
    browser.force_login(people.teammate)

    assert browser.post(f"/workflows/{Workflow.objects.get().pk}/run/").status_code == 302
    assert trail.new() == [("workflow", "etl", "run_now", "page", people.teammate.pk, "teammate")]


def test_a_refused_workflow_action_writes_no_entry(people):
    save_job(Job(name="shell", kind="command", target="true", owner=people.owner, group=people.team),
             {"type": "manual"})
    people.client(people.runner).post("/api/workflows/", {**ETL, "nodes": ["extract", "shell"],
                                                          "edges": [{"from": "extract", "to": "shell"}]},
                                      format="json")
    workflow = Workflow.objects.get()
    trail = Trail()
    trail.new()
    teammate = people.client(people.teammate)  # sees the workflow, may not run command jobs

    for call in ("run", "pause", "resume"):
        refused = teammate.post(f"/api/workflows/{workflow.pk}/{call}/")
        assert refused.status_code == 403 and "command jobs" in refused.json()["detail"]
    assert teammate.delete(f"/api/workflows/{workflow.pk}/").status_code == 403
    with pytest.raises(CommandError, match="command jobs"):
        call_command("workflows", "--as", "teammate", "run", "etl", stdout=StringIO())
    assert trail.new() == []
    assert (WorkflowRun.objects.count(), Workflow.objects.get().enabled) == (0, True)

    assert people.client(people.runner).post(f"/api/workflows/{workflow.pk}/run/").status_code == 202
    assert trail.new() == [("workflow", "etl", "run_now", "api", people.runner.pk, "runner")]


def test_jobs_apply_writes_an_entry_per_workflow_created_changed_or_pruned(tmp_path):
    from .test_workflows_as_code import FILE

    def apply(text, *options):
        path = tmp_path / "jobs.yaml"
        path.write_text(text)
        call_command("jobs", "apply", str(path), *options, stdout=StringIO())

    def workflow_entries():
        return [(e.action, e.job_name, e.source, e.changes.get("description"))
                for e in work_entries().filter(subject="workflow").order_by("id")]

    changed = FILE.replace("Nightly ETL.", "Nightly ETL, loaded.")
    apply(FILE)
    assert workflow_entries() == [("create", "etl", "cli", [None, "Nightly ETL."])]
    apply(changed)
    assert workflow_entries()[1:] == [("change", "etl", "cli", ["Nightly ETL.", "Nightly ETL, loaded."])]
    apply(changed)  # nothing to change: no entry
    assert len(workflow_entries()) == 2
    apply(FILE.split("workflows:")[0] + "workflows: []\n", "--prune")
    assert workflow_entries()[2:] == [("delete", "etl", "cli", ["Nightly ETL, loaded.", None])]
    assert not Workflow.objects.exists()


def test_changing_and_deleting_a_workflow_in_the_admin_writes_one_entry_each(people, admin_client):
    from django.urls import reverse

    people.client(people.owner).post("/api/workflows/", ETL, format="json")
    workflow = Workflow.objects.get()
    trail = Trail()
    trail.new()
    admin = User.objects.get(username="admin")

    form = {"name": "etl", "description": "from the admin", "owner": people.owner.pk, "group": people.team.pk,
            "enabled": "", "on_upstream_failure": "run"}
    form.update({f"{prefix}-{key}": value for prefix in ("nodes", "edges")
                 for key, value in (("TOTAL_FORMS", "0"), ("INITIAL_FORMS", "0"))})
    changed = admin_client.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), form)
    assert changed.status_code == 302, changed.content.decode()[:2000]
    assert trail.new() == [("workflow", "etl", "change", "admin", admin.pk, "admin")]
    assert work_entries().get(action="change").changes == {
        "description": ["", "from the admin"], "enabled": [True, False], "on_upstream_failure": ["skip", "run"]}

    deleted = admin_client.post(reverse("admin:workflows_workflow_delete", args=[workflow.pk]), {"post": "yes"})
    assert deleted.status_code == 302
    assert trail.new() == [("workflow", "etl", "delete", "admin", admin.pk, "admin")]
    assert not Workflow.objects.exists()
