"""The workflows half of the REST API: define a graph (cycles rejected, named), who sees what,
run (202), the run with its steps, re-run from the failed steps, cancel, and pause/resume."""

import pytest
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun
from workflows.models import Workflow, WorkflowRun

from .api_personas import make_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    personas = make_personas()
    for name in ("extract", "transform", "load"):
        save_job(Job(name=name, kind="callable", target="builtin.noop", owner=personas.owner,
                     group=personas.team), {"type": "manual"})
    return personas


def pipeline(**fields):
    return {"name": "etl", "nodes": ["extract", "transform", "load"],
            "edges": [{"from": "extract", "to": "transform"}, {"from": "transform", "to": "load"}], **fields}


def create(people, user=None, **fields):
    response = people.client(user or people.owner).post("/api/workflows/", pipeline(**fields), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_it_answers_401_without_credentials(people):
    assert APIClient().get("/api/workflows/").status_code == 401
    assert APIClient().get("/api/workflow-runs/").status_code == 401


def test_it_creates_a_workflow_with_its_graph_and_schedule(people):
    body = create(people, group="team", schedule={"type": "cron", "cron": "0 2 * * *", "timezone": "UTC"})
    assert body["nodes"] == ["extract", "transform", "load"]
    assert body["edges"] == [{"from": "extract", "to": "transform"}, {"from": "transform", "to": "load"}]
    assert body["schedule"] == {"type": "cron", "cron": "0 2 * * *", "timezone": "UTC"}
    assert body["next_run_at"] is not None
    assert body["on_upstream_failure"] == "skip"
    assert (body["owner"], body["group"]) == ("owner", "team")


def test_it_rejects_a_cycle_naming_it(people):
    edges = [{"from": "extract", "to": "transform"}, {"from": "transform", "to": "load"},
             {"from": "load", "to": "extract"}]
    response = people.client(people.owner).post("/api/workflows/", pipeline(edges=edges), format="json")
    assert response.status_code == 400
    assert response.json() == {"edges": ["cycle: extract → transform → load → extract"]}
    assert not Workflow.objects.exists()


def test_it_rejects_a_cycle_introduced_by_an_edit(people):
    body = create(people)
    edges = [*body["edges"], {"from": "load", "to": "transform"}]
    response = people.client(people.owner).patch(f"/api/workflows/{body['id']}/", {"edges": edges}, format="json")
    assert response.status_code == 400
    assert response.json() == {"edges": ["cycle: transform → load → transform"]}
    assert len(Workflow.objects.get().edges.all()) == 2


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"nodes": ["extract", "nope"], "edges": []}, "nodes", "No job named 'nope' that you may use."),
    ({"nodes": ["extract", "extract"], "edges": []}, "nodes", "'extract' is listed more than once."),
    ({"nodes": [], "edges": []}, "nodes", "Must be a non-empty list of job names."),
    ({"edges": [{"from": "extract", "to": "missing"}]}, "edges", "edges[0]: 'missing' is not one of the workflow's nodes."),
    ({"edges": [{"from": "load", "to": "load"}]}, "edges", "cycle: load → load"),
    ({"on_upstream_failure": "explode"}, "on_upstream_failure", '"explode" is not a valid choice.'),
])
def test_it_answers_bad_graphs_with_a_message_per_field(people, change, field, message):
    response = people.client(people.owner).post("/api/workflows/", pipeline(**change), format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])


def test_jobs_of_someone_else_cannot_be_used(people):
    response = people.client(people.outsider).post("/api/workflows/", pipeline(), format="json")
    assert response.status_code == 400
    assert "No job named 'extract' that you may use." in response.json()["nodes"]


def test_an_outsider_sees_nothing_and_a_teammate_sees_the_groups_workflows(people):
    body = create(people, group="team")
    wf_id = body["id"]
    run_id = people.client(people.owner).post(f"/api/workflows/{wf_id}/run/").json()["id"]
    outsider, teammate = people.client(people.outsider), people.client(people.teammate)
    assert outsider.get("/api/workflows/").json()["results"] == []
    assert outsider.get(f"/api/workflows/{wf_id}/").status_code == 404
    assert outsider.post(f"/api/workflows/{wf_id}/run/").status_code == 404
    assert outsider.get("/api/workflow-runs/").json()["results"] == []
    assert outsider.get(f"/api/workflow-runs/{run_id}/").status_code == 404
    assert outsider.post(f"/api/workflow-runs/{run_id}/cancel/").status_code == 404
    assert [w["name"] for w in teammate.get("/api/workflows/").json()["results"]] == ["etl"]
    assert teammate.get(f"/api/workflow-runs/{run_id}/").status_code == 200


def test_run_answers_202_with_the_workflow_run_and_its_steps(people):
    wf_id = create(people)["id"]
    response = people.client(people.owner).post(f"/api/workflows/{wf_id}/run/")
    assert response.status_code == 202
    body = response.json()
    assert response["Location"].endswith(f"/api/workflow-runs/{body['id']}/")
    assert body["status"] == "running" and body["trigger"] == "manual"
    assert [(s["job_name"], s["status"], s["run_status"]) for s in body["steps"]] == [
        ("extract", "active", "queued"), ("transform", "waiting", None), ("load", "waiting", None)]
    listed = people.client(people.owner).get(f"/api/workflow-runs/?workflow={wf_id}").json()["results"]
    assert [r["id"] for r in listed] == [body["id"]]


def test_rerun_answers_409_unless_the_run_failed_and_202_when_it_did(people):
    wf_id = create(people)["id"]
    client = people.client(people.owner)
    wf_run = client.post(f"/api/workflows/{wf_id}/run/").json()
    assert client.post(f"/api/workflow-runs/{wf_run['id']}/rerun/").status_code == 409
    run = JobRun.objects.get(pk=wf_run["steps"][0]["run"])
    lifecycle.claim(run.pk, 1, "w", 1)
    lifecycle.record_failure(run.pk, 1, "boom")
    detail = client.get(f"/api/workflow-runs/{wf_run['id']}/").json()
    assert detail["status"] == "failed"
    assert [s["status"] for s in detail["steps"]] == ["failed", "skipped", "skipped"]
    response = client.post(f"/api/workflow-runs/{wf_run['id']}/rerun/")
    assert response.status_code == 202
    assert response.json()["rerun_of"] == wf_run["id"]
    assert response.json()["trigger"] == "rerun"
    again = client.post(f"/api/workflow-runs/{wf_run['id']}/rerun/")
    assert again.status_code == 409 and "already re-run" in again.json()["detail"]


def test_cancel_cancels_a_running_workflow_run_and_is_idempotent(people):
    wf_id = create(people)["id"]
    client = people.client(people.owner)
    wf_run = client.post(f"/api/workflows/{wf_id}/run/").json()
    body = client.post(f"/api/workflow-runs/{wf_run['id']}/cancel/").json()
    assert body["status"] == "cancelled" and body["detail"] == "Cancelled."
    assert [s["status"] for s in body["steps"]] == ["cancelled"] * 3
    assert JobRun.objects.get(pk=wf_run["steps"][0]["run"]).status == "cancelled"
    again = client.post(f"/api/workflow-runs/{wf_run['id']}/cancel/").json()
    assert again["detail"] == "The workflow run is already cancelled; nothing changed."


def test_a_command_job_in_a_workflow_needs_the_command_permission(people):
    save_job(Job(name="shell", kind="command", target="true", owner=people.owner), {"type": "manual"})
    response = people.client(people.owner).post("/api/workflows/", pipeline(nodes=["shell"], edges=[]),
                                                format="json")
    assert response.status_code == 400
    assert "command jobs" in response.json()["nodes"][0]


def test_a_job_used_by_a_workflow_cannot_be_deleted(people):
    create(people)
    job = Job.objects.get(name="load")
    response = people.client(people.owner).delete(f"/api/jobs/{job.pk}/")
    assert response.status_code == 409
    assert response.json()["detail"] == "The job load is used by the workflow(s) etl: remove it from them first."
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_job_taken_out_of_its_workflows_can_be_deleted_with_its_runs(people):
    wf_id = create(people)["id"]
    client = people.client(people.owner)
    wf_run = client.post(f"/api/workflows/{wf_id}/run/").json()
    client.post(f"/api/workflow-runs/{wf_run['id']}/cancel/")
    edit = {"nodes": ["transform", "load"], "edges": [{"from": "transform", "to": "load"}]}
    assert client.patch(f"/api/workflows/{wf_id}/", edit, format="json").status_code == 200
    extract = Job.objects.get(name="extract")
    assert client.delete(f"/api/jobs/{extract.pk}/").status_code == 204
    assert not JobRun.objects.filter(job_id=extract.pk).exists()
    steps = client.get(f"/api/workflow-runs/{wf_run['id']}/").json()["steps"]
    assert [s["job_name"] for s in steps] == ["transform", "load"]


def test_pause_and_resume(people):
    wf_id = create(people, schedule={"type": "interval", "every_seconds": 60})["id"]
    client = people.client(people.owner)
    assert client.post(f"/api/workflows/{wf_id}/pause/").json()["enabled"] is False
    body = client.post(f"/api/workflows/{wf_id}/resume/").json()
    assert body["enabled"] is True and body["next_run_at"] is not None


def test_delete_keeps_the_job_runs(people):
    wf_id = create(people)["id"]
    client = people.client(people.owner)
    client.post(f"/api/workflows/{wf_id}/run/")
    assert client.delete(f"/api/workflows/{wf_id}/").status_code == 204
    assert not WorkflowRun.objects.exists()
    assert JobRun.objects.filter(job__name="extract").count() == 1


def test_running_a_workflow_with_a_command_job_needs_the_command_permission(people):
    save_job(Job(name="shell", kind="command", target="true", owner=people.owner, group=people.team),
             {"type": "manual"})
    body = people.client(people.runner).post("/api/workflows/", pipeline(nodes=["shell"], edges=[]),
                                             format="json").json()
    Workflow.objects.filter(pk=body["id"]).update(owner=people.owner)
    owner = people.client(people.owner)
    assert owner.post(f"/api/workflows/{body['id']}/run/").status_code == 403
    assert owner.patch(f"/api/workflows/{body['id']}/", {"enabled": False}, format="json").status_code == 403
    assert not WorkflowRun.objects.exists()


def test_the_list_takes_a_bounded_number_of_queries(people, django_assert_max_num_queries):
    client = people.client(people.owner)
    for i in range(5):
        client.post(f"/api/workflows/{create(people, name=f'etl-{i}')['id']}/run/")
    with django_assert_max_num_queries(8):
        body = client.get("/api/workflows/").json()
    assert len(body["results"]) == 5 and body["results"][0]["nodes"] == ["extract", "transform", "load"]
    assert all(workflow["last_run"]["status"] == "running" for workflow in body["results"])
