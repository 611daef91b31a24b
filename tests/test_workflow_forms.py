"""The workflow form of the pages: a workflow's jobs, edges ("a -> b" lines), schedule and steps'
values made, changed and deleted through the API's serializer and the workflow actions (each an
audit entry), a preview that draws the graph and saves nothing, bad input answered with the API's
message and what was typed kept, another team's workflow out of reach."""

import pytest

from audit.models import AuditEntry, Subject
from workflows.models import Workflow

from .api_personas import browser
from .workflow_helpers import make_job, make_workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(people):
    for name in ("extract", "transform", "load", "report"):
        make_job(name, owner=people.owner, group=people.team)


def workflow_post(**changes):
    return {"name": "etl", "description": "", "enabled": "on", "group": "team", "on_upstream_failure": "skip",
            "nodes": "extract\ntransform\nload", "edges": "extract -> transform\ntransform -> load (run)",
            "params": "", "schedule_type": "manual", **changes}


def test_an_owner_makes_a_workflow_with_its_graph_and_schedule(people, jobs):
    owner = browser(people.owner)
    assert "Create the workflow" in owner.get("/workflows/new/").content.decode()
    assert "/workflows/new/" in owner.get("/workflows/").content.decode()
    answer = owner.post("/workflows/new/", workflow_post(schedule_type="cron", cron="0 4 * * *",
                                                         timezone="Europe/Berlin"))
    workflow = Workflow.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/workflows/{workflow.pk}/"
    nodes, edges = workflow.graph()
    assert sorted(nodes) == ["extract", "load", "transform"]
    assert sorted((e.upstream, e.downstream, e.on_failure) for e in edges) == [
        ("extract", "transform", ""), ("transform", "load", "run")]
    assert (workflow.owner, workflow.group, workflow.crontab.minute, workflow.crontab.hour,
            str(workflow.crontab.timezone)) == (people.owner, people.team, "0", "4", "Europe/Berlin")
    assert AuditEntry.objects.filter(subject=Subject.WORKFLOW, action="create", source="page").count() == 1


def test_the_form_shows_the_stored_workflow_and_saves_a_change(people, jobs):
    workflow = make_workflow("etl", ["extract", "transform"], [("extract", "transform", "run")],
                             owner=people.owner, group=people.team)
    owner = browser(people.owner)
    assert f"/workflows/{workflow.pk}/edit/" in owner.get(f"/workflows/{workflow.pk}/").content.decode()
    form = owner.get(f"/workflows/{workflow.pk}/edit/").content.decode()
    assert "extract -&gt; transform (run)" in form and "Save" in form and 'class="workflow-graph"' in form
    answer = owner.post(f"/workflows/{workflow.pk}/edit/", workflow_post(
        nodes="extract\ntransform\nreport", edges="extract -> transform\nextract -> report",
        schedule_type="interval", every_seconds="3600"))
    assert answer.status_code == 302
    workflow.refresh_from_db()
    assert sorted(workflow.graph()[0]) == ["extract", "report", "transform"]
    assert workflow.interval.every == 3600
    change = AuditEntry.objects.get(subject=Subject.WORKFLOW, action="change")
    assert change.source == "page" and change.changes["edges"] == [
        ["extract -> transform (run)"], ["extract -> report", "extract -> transform"]]


def test_preview_draws_the_typed_graph_and_saves_nothing(people, jobs):
    answer = browser(people.owner).post("/workflows/new/", workflow_post(preview="1"))
    assert answer.status_code == 200
    text = answer.content.decode()
    assert 'id="graph-preview"' in text and 'data-job="load"' in text and 'data-job="transform"' in text
    assert not Workflow.objects.exists() and not AuditEntry.objects.filter(subject=Subject.WORKFLOW).exists()


@pytest.mark.parametrize("changes, message", [
    ({"edges": "extract -> transform\ntransform -> extract"}, "cycle: "),
    ({"edges": "extract => transform"}, "Line 1: write it as &#x27;upstream -&gt; downstream&#x27;"),
    ({"edges": "extract -> nowhere"}, "&#x27;nowhere&#x27; is not one of the workflow&#x27;s nodes."),
    ({"nodes": "extract\nsomeone-elses-job"}, "No job named &#x27;someone-elses-job&#x27; that you may use."),
    ({"edges": "extract -> transform (maybe)"}, "on_failure"),
    ({"params": "{not json"}, "Not JSON:"),
    ({"name": ""}, "This field may not be blank."),
    ({"name": "x" * 500}, "no more than"),
    ({"schedule_type": "cron", "cron": "61 * * * *"}, "cron"),
    ({"group": "others"}, "You are not a member of the group &#x27;others&#x27;."),
])
def test_bad_input_shows_the_apis_message_and_keeps_what_was_typed(people, jobs, changes, message):
    make_job("someone-elses-job", owner=people.outsider)
    for extra in ({}, {"preview": "1"}):
        answer = browser(people.owner).post("/workflows/new/", workflow_post(**changes, **extra))
        assert answer.status_code == 400
        text = answer.content.decode()
        assert message in text
        assert ">\nextract\n" in text  # the jobs as typed
    assert not Workflow.objects.exists()


def test_another_teams_workflow_is_not_found(people, jobs):
    workflow = make_workflow("etl", ["extract"], [], owner=people.owner, group=people.team)
    outsider = browser(people.outsider)
    assert outsider.get(f"/workflows/{workflow.pk}/edit/").status_code == 404
    assert outsider.post(f"/workflows/{workflow.pk}/edit/", workflow_post()).status_code == 404
    assert outsider.post(f"/workflows/{workflow.pk}/delete/").status_code == 404
    assert Workflow.objects.get().graph()[0] == ["extract"]


def test_a_workflow_is_deleted_from_its_form(people, jobs):
    workflow = make_workflow("etl", ["extract"], [], owner=people.owner, group=people.team)
    answer = browser(people.teammate).post(f"/workflows/{workflow.pk}/delete/")
    assert answer.status_code == 302 and answer["Location"] == "/workflows/"
    assert not Workflow.objects.exists()
    assert AuditEntry.objects.filter(subject=Subject.WORKFLOW, action="delete", source="page").count() == 1


def test_a_group_set_by_staff_is_kept_when_its_owner_edits_the_workflow(people, jobs):
    others = people.outsider.groups.get()  # not the owner's group: staff gave it
    workflow = make_workflow("etl", ["extract"], [], owner=people.owner, group=others)
    owner = browser(people.owner)
    assert '<option value="others" selected>' in owner.get(f"/workflows/{workflow.pk}/edit/").content.decode()
    answer = owner.post(f"/workflows/{workflow.pk}/edit/", workflow_post(group="others", nodes="extract", edges="",
                                                                         description="nightly"))
    assert answer.status_code == 302
    workflow.refresh_from_db()
    assert (workflow.group, workflow.description) == (others, "nightly")
