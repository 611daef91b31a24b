"""A workflow's versions, as a job's (tests/test_versions.py): every saved change (the API, the
pages' form, a jobs file, the admin) is the next version (GET /api/workflows/<id>/versions/,
/versions/<n>/ with ?against=<m> for a diff); a restore (POST /api/workflows/<id>/versions/<n>/restore/,
or the page's button) is audited and is itself a new version, refused when what the version was is no
longer valid; each workflow run names the version it ran (``workflow_version``); version 0, a
missing one, another team's workflow are 404s; one who may not act on the workflow cannot restore."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEntry, Subject
from jobs.definitions.jobs import save_job
from jobs.models import Job
from workflows.models import Workflow, WorkflowRun, WorkflowVersion

from .api_personas import browser, make_personas
from .test_versions import versions_404s

pytestmark = pytest.mark.django_db

ETL = {"name": "etl", "nodes": ["extract", "transform", "load"], "group": "team",
       "edges": [{"from": "extract", "to": "transform"}, {"from": "transform", "to": "load"}],
       "schedule": {"type": "manual"}}


@pytest.fixture
def people():
    personas = make_personas()
    for name in ("extract", "transform", "load"):
        save_job(Job(name=name, kind="callable", target="builtin.noop", owner=personas.owner, group=personas.team),
                 {"type": "manual"})
    return personas


def create(api, body=ETL):
    answer = api.post("/api/workflows/", body, format="json")
    assert answer.status_code == 201, answer.json()
    return Workflow.objects.get(pk=answer.json()["id"])


def patch(api, workflow, body):
    answer = api.patch(f"/api/workflows/{workflow.pk}/", body, format="json")
    assert answer.status_code == 200, answer.json()
    return answer.json()


def test_each_saved_change_of_a_workflow_is_a_version_with_its_number_author_time_and_changes(people):
    api = people.client(people.owner)
    before = timezone.now()
    workflow = create(api)
    patch(api, workflow, {"description": "nightly"})
    patch(api, workflow, {"description": "nightly"})  # no change: no version
    answered = patch(api, workflow, {"edges": [{"from": "extract", "to": "transform", "on_failure": "run"}],
                                     "schedule": {"type": "interval", "every_seconds": 3600}})

    listed = api.get(f"/api/workflows/{workflow.pk}/versions/").json()

    assert answered["version"] == 3 and Workflow.objects.get(pk=workflow.pk).version == 3
    assert listed["count"] == 3
    assert [(v["version"], v["author"], v["detail"]) for v in listed["results"]] == [
        (3, "owner", ""), (2, "owner", ""), (1, "owner", "")]
    assert listed["results"][1]["changes"] == {"description": ["", "nightly"]}
    assert listed["results"][0]["changes"] == {
        "edges": [["extract -> transform", "transform -> load"], ["extract -> transform (run)"]],
        "schedule": [{"type": "manual"}, {"type": "interval", "every_seconds": 3600}]}
    assert listed["results"][2]["changes"]["nodes"] == [None, ["extract", "load", "transform"]]
    assert all(before <= timezone.datetime.fromisoformat(v["created_at"]) <= timezone.now()
               for v in listed["results"])
    one = api.get(f"/api/workflows/{workflow.pk}/versions/2/").json()
    assert (one["version"], one["changes"], one["values"]["description"], one["values"]["edges"]) == (
        2, {"description": ["", "nightly"]}, "nightly", ["extract -> transform", "transform -> load"])
    against = api.get(f"/api/workflows/{workflow.pk}/versions/3/?against=1").json()
    assert against["against"] == 1 and against["diff"] == {
        "description": ["", "nightly"],
        "edges": [["extract -> transform", "transform -> load"], ["extract -> transform (run)"]],
        "schedule": [{"type": "manual"}, {"type": "interval", "every_seconds": 3600}]}


def test_a_restore_is_audited_and_is_a_new_version_of_what_the_old_one_was(people):
    api = people.client(people.owner)
    workflow = create(api)
    patch(api, workflow, {"name": "etl-2", "nodes": ["extract", "transform"],
                          "edges": [{"from": "extract", "to": "transform", "on_failure": "run"}],
                          "params": {"extract": {}}, "on_upstream_failure": "run",
                          "schedule": {"type": "cron", "cron": "0 2 * * *", "timezone": "UTC"}})
    assert api.post(f"/api/workflows/{workflow.pk}/pause/").status_code == 200

    restored = api.post(f"/api/workflows/{workflow.pk}/versions/1/restore/")

    assert restored.status_code == 201, restored.json()
    body = restored.json()
    assert (body["version"], body["detail"], body["author"]) == (3, "restored version 1", "owner")
    assert body["changes"]["name"] == ["etl-2", "etl"]
    assert body["changes"]["nodes"] == [["extract", "transform"], ["extract", "load", "transform"]]
    workflow.refresh_from_db()
    nodes, edges = workflow.graph()
    assert (workflow.name, workflow.on_upstream_failure, workflow.schedule_type, workflow.version) == (
        "etl", "skip", "manual", 3)
    assert sorted(nodes) == ["extract", "load", "transform"]
    assert sorted((e.upstream, e.downstream, e.on_failure) for e in edges) == [
        ("extract", "transform", ""), ("transform", "load", "")]
    assert (workflow.enabled, workflow.owner, workflow.group) == (False, people.owner, people.team)  # kept
    entry = AuditEntry.objects.filter(subject=Subject.WORKFLOW, action="change").latest("id")
    assert (entry.job_name, entry.actor, entry.source, entry.detail) == ("etl", people.owner, "api",
                                                                          "restored version 1")
    assert entry.changes["name"] == ["etl-2", "etl"]
    # Everything came back as version 1 had it, but whether the workflow is enabled.
    assert api.get(f"/api/workflows/{workflow.pk}/versions/3/?against=1").json()["diff"] == {
        "enabled": [True, False]}
    again = api.post(f"/api/workflows/{workflow.pk}/versions/1/restore/")
    assert again.status_code == 200 and again.json()["version"] == 3
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 3


def test_version_0_a_missing_version_and_another_teams_workflow_are_404s(people):
    workflow = create(people.client(people.owner))

    versions_404s(people, f"/api/workflows/{workflow.pk}", f"/workflows/{workflow.pk}")

    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 1
    assert not AuditEntry.objects.filter(subject=Subject.WORKFLOW, action="change").exists()


def test_a_restore_of_a_version_no_longer_valid_is_refused_and_changes_nothing(people):
    api = people.client(people.owner)
    workflow = create(api)
    patch(api, workflow, {"nodes": ["extract", "transform"], "edges": [{"from": "extract", "to": "transform"}]})
    Job.objects.get(name="load").delete()  # out of the workflow now, it may go: version 1 names it
    patch(api, workflow, {"name": "etl-2"})
    create(api, {**ETL, "name": "etl", "nodes": ["extract"], "edges": []})  # version 2's name taken

    gone = api.post(f"/api/workflows/{workflow.pk}/versions/1/restore/")
    taken = api.post(f"/api/workflows/{workflow.pk}/versions/2/restore/")
    on_the_page = browser(people.owner).post(f"/workflows/{workflow.pk}/versions/1/restore/", follow=True)

    assert gone.status_code == 400 and gone.json()["nodes"] == ["No job named 'load' that you may use."], gone.json()
    assert taken.status_code == 400 and "name" in taken.json(), taken.json()
    assert "No job named &#x27;load&#x27; that you may use." in on_the_page.content.decode()
    workflow.refresh_from_db()
    assert (workflow.name, sorted(workflow.graph()[0]), workflow.version, workflow.versions.count()) == (
        "etl-2", ["extract", "transform"], 3, 3)
    assert not AuditEntry.objects.filter(subject=Subject.WORKFLOW, detail__startswith="restored").exists()


def test_one_who_may_not_act_on_the_workflow_cannot_restore_it(people):
    runner = people.client(people.runner)
    save_job(Job(name="shell", kind="command", target="true", owner=people.runner, group=people.team),
             {"type": "manual"})
    workflow = create(runner, {**ETL, "nodes": ["extract", "shell"], "edges": [{"from": "extract", "to": "shell"}]})
    patch(runner, workflow, {"description": "changed"})
    teammate = people.client(people.teammate)  # sees the team's workflow, may not run command jobs

    listed = teammate.get(f"/api/workflows/{workflow.pk}/versions/")
    refused = teammate.post(f"/api/workflows/{workflow.pk}/versions/1/restore/")
    refused_page = browser(people.teammate).post(f"/workflows/{workflow.pk}/versions/1/restore/")
    page = browser(people.teammate).get(f"/workflows/{workflow.pk}/").content.decode()

    assert listed.status_code == 200 and listed.json()["count"] == 2
    assert refused.status_code == 403 and "run_command_jobs" in refused.json()["detail"]
    assert refused_page.status_code == 403
    assert 'id="versions"' in page and "restore-version" not in page
    workflow.refresh_from_db()
    assert (workflow.description, workflow.version, workflow.versions.count()) == ("changed", 2, 2)
    assert runner.post(f"/api/workflows/{workflow.pk}/versions/1/restore/").status_code == 201


def test_a_workflow_run_names_the_version_it_ran(people):
    api = people.client(people.owner)
    workflow = create(api)
    first = api.post(f"/api/workflows/{workflow.pk}/run/").json()
    patch(api, workflow, {"description": "v2"})
    second = api.post(f"/api/workflows/{workflow.pk}/run/").json()
    day_ago = timezone.now() - timedelta(days=1)
    old = WorkflowRun.objects.create(workflow=workflow, trigger="manual", scheduled_for=day_ago, created_at=day_ago)

    assert (first["workflow_version"], second["workflow_version"]) == (1, 2)
    assert api.get(f"/api/workflow-runs/{old.pk}/").json()["workflow_version"] is None
    assert [r["workflow_version"] for r in api.get(f"/api/workflow-runs/?workflow={workflow.pk}").json()["results"]] \
        == [2, 1, None]
    page = browser(people.owner).get(f"/workflows/{workflow.pk}/?run={first['id']}").content.decode()
    assert "workflow version 1" in page and f"?run={first['id']}&amp;version=1&amp;against=2#versions" in page


def test_the_pages_form_a_jobs_file_and_the_admin_make_versions_too(people, admin_client, tmp_path):
    from .test_workflow_forms import workflow_post

    owner = browser(people.owner)
    assert owner.post("/workflows/new/", workflow_post()).status_code == 302
    workflow = Workflow.objects.get(name="etl")
    assert owner.post(f"/workflows/{workflow.pk}/edit/", workflow_post(description="from the form")).status_code == 302
    form = {"name": "etl", "description": "from the admin", "owner": people.owner.pk, "group": people.team.pk,
            "enabled": "on", "on_upstream_failure": "skip"}
    form.update({f"{prefix}-{key}": "0" for prefix in ("nodes", "edges") for key in ("TOTAL_FORMS", "INITIAL_FORMS")})
    assert admin_client.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), form).status_code == 302
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: []\nworkflows:\n- name: etl\n  description: from a file\n  schedule: {type: manual}\n"
                    "  nodes: [extract, transform, load]\n"
                    "  edges: [{from: extract, to: transform}, {from: transform, to: load, on_failure: run}]\n")
    call_command("jobs", "apply", str(path), stdout=StringIO())

    versions = people.client(people.owner).get(f"/api/workflows/{workflow.pk}/versions/").json()["results"]

    assert [(v["version"], v["author"], v["changes"].get("description")) for v in versions] == [
        (4, "an operator", ["from the admin", "from a file"]), (3, "admin", ["from the form", "from the admin"]),
        (2, "owner", ["", "from the form"]), (1, "owner", [None, ""])]
    assert Workflow.objects.get(pk=workflow.pk).version == 4


def test_the_workflow_page_lists_the_versions_shows_a_diff_and_restores(people):
    api = people.client(people.owner)
    workflow = create(api)
    patch(api, workflow, {"description": "nightly"})
    page = browser(people.owner)

    shown = page.get(f"/workflows/{workflow.pk}/?version=2&against=1").content.decode()
    missing = page.get(f"/workflows/{workflow.pk}/?version=2&against=9").content.decode()
    restored = page.post(f"/workflows/{workflow.pk}/versions/1/restore/", follow=True)
    again = page.post(f"/workflows/{workflow.pk}/versions/1/restore/", follow=True)

    assert 'id="versions"' in shown and "Now at version 2." in shown
    assert f'action="/workflows/{workflow.pk}/versions/1/restore/"' in shown
    assert 'id="version-diff"' in shown and "<code>description</code></td><td></td><td>nightly</td>" in shown
    assert "The workflow has no version 9." in missing
    assert restored.redirect_chain == [(f"/workflows/{workflow.pk}/", 302)]
    assert "Restored version 1: the workflow is now at version 3." in restored.content.decode()
    assert "The workflow is already as version 1 made it; nothing changed." in again.content.decode()
    assert Workflow.objects.get(pk=workflow.pk).description == ""
    entry = AuditEntry.objects.filter(subject=Subject.WORKFLOW, action="change").latest("id")
    assert (entry.source, entry.detail) == ("page", "restored version 1")
    assert page.get(f"/workflows/{workflow.pk}/versions/1/restore/").status_code == 405
