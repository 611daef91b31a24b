"""The workflow pages: the list, the graph with nodes coloured by the selected run's steps, the
run history, the buttons, and who sees what."""

import re

import pytest
from django.test import Client

from jobs import lifecycle
from workflows import progress
from workflows.models import WorkflowRun

from .workflow_helpers import make_job, make_workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def diamond(people):
    for name in "abcd":
        make_job(name, owner=people.owner, group=people.team)
    return make_workflow("diamond", "abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
                         owner=people.owner, group=people.team)


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def node_statuses(html):
    return dict(re.findall(r'<g class="node step-\w+" data-job="(\w+)" data-status="(\w+)"', html))


def finish(wf_run, name, ok=True):
    run = wf_run.steps.get(job__name=name).run
    lifecycle.claim(run.pk, run.attempt, "w", 1)
    if ok:
        lifecycle.record_success(run.pk, run.attempt)
    else:
        lifecycle.record_failure(run.pk, run.attempt, "boom")


def test_pages_need_a_login(diamond):
    assert Client().get("/workflows/").status_code == 302
    assert Client().get(f"/workflows/{diamond.pk}/").status_code == 302


@pytest.mark.parametrize("schedule, described", [
    ({"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"}, "(0 3 * * *, Europe/Paris)"),
    ({"type": "interval", "every_seconds": 90}, "Every 90 seconds"),
])
def test_a_scheduled_workflows_page_says_its_schedule(people, schedule, described):
    for name in "xy":
        make_job(name, owner=people.owner)
    workflow = make_workflow("nightly", "xy", [("x", "y")], schedule=schedule, owner=people.owner)
    for address in ("/workflows/", f"/workflows/{workflow.pk}/"):
        response = client_for(people.owner).get(address)
        assert response.status_code == 200
        assert described in response.content.decode()


def test_the_list_shows_only_the_users_workflows(people, diamond):
    assert "diamond" in client_for(people.teammate).get("/workflows/").content.decode()
    assert "diamond" not in client_for(people.outsider).get("/workflows/").content.decode()
    assert client_for(people.outsider).get(f"/workflows/{diamond.pk}/").status_code == 404
    assert client_for(people.outsider).post(f"/workflows/{diamond.pk}/run/").status_code == 404


def test_the_graph_colours_each_node_by_its_step_in_the_selected_run(people, diamond):
    client = client_for(people.owner)
    assert node_statuses(client.get(f"/workflows/{diamond.pk}/").content.decode()) == dict.fromkeys("abcd", "none")

    first = progress.start(diamond)
    finish(first, "a")
    finish(first, "b", ok=False)
    finish(first, "c")
    second = progress.start(diamond)

    latest = client.get(f"/workflows/{diamond.pk}/").content.decode()
    assert node_statuses(latest) == {"a": "active", "b": "waiting", "c": "waiting", "d": "waiting"}
    selected = client.get(f"/workflows/{diamond.pk}/?run={first.pk}").content.decode()
    assert node_statuses(selected) == {"a": "succeeded", "b": "failed", "c": "succeeded", "d": "skipped"}
    assert "upstream b failed" in selected
    assert f'?run={second.pk}"' in selected and f'?run={first.pk}"' in selected  # run history
    assert selected.count('class="edge"') == 4
    assert 'id="rerun"' in selected


def test_the_buttons_run_rerun_and_cancel(people, diamond):
    client = client_for(people.teammate)
    response = client.post(f"/workflows/{diamond.pk}/run/")
    wf_run = WorkflowRun.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"?run={wf_run.pk}")
    client.post(f"/workflow-runs/{wf_run.pk}/cancel/")
    wf_run.refresh_from_db()
    assert wf_run.status == "cancelled"
    client.post(f"/workflow-runs/{wf_run.pk}/rerun/")
    again = WorkflowRun.objects.get(rerun_of=wf_run)
    assert again.status == "running"
    assert client_for(people.outsider).post(f"/workflow-runs/{again.pk}/cancel/").status_code == 404


def test_the_nav_links_to_the_workflows(people):
    assert 'href="/workflows/"' in client_for(people.owner).get("/").content.decode()
