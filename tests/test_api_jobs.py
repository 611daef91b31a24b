"""The jobs half of the REST API: CRUD, filters, validation, permissions, run now, pause, resume."""

import json

import pytest
from django.contrib.auth.models import Permission, User
from django_celery_beat.models import CrontabSchedule
from rest_framework.test import APIClient

from jobs.access import tokens as api_tokens
from jobs.models import Job, JobRun, RunStatus, RunTrigger

pytestmark = pytest.mark.django_db

CRON = {"type": "cron", "cron": "*/5 * * * *", "timezone": "Europe/Berlin"}


def new_job(**fields):
    return {"name": "sync", "kind": "callable", "target": "builtin.echo", "args": [1], "kwargs": {"a": 2},
            "schedule": CRON, **fields}


def test_it_answers_401_without_credentials(people):
    client = APIClient()
    assert client.get("/api/jobs/").status_code == 401
    assert client.post(f"/api/jobs/{people.job.pk}/run/").status_code == 401
    assert client.get("/api/runs/").status_code == 401
    assert not JobRun.objects.exists()


def test_it_accepts_a_token(people):
    _, key = api_tokens.create(people.owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/jobs/")
    assert response.status_code == 200
    assert [job["name"] for job in response.json()["results"]] == ["nightly-report"]
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/jobs/").status_code == 401


def test_it_creates_a_cron_job_owned_by_the_caller(people):
    response = people.client(people.owner).post("/api/jobs/", new_job(group="team", tags=["etl"]), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert job.owner == people.owner and job.group == people.team
    assert body["owner"] == "owner" and body["group"] == "team"
    assert body["schedule"] == CRON
    assert body["next_run_at"] is not None and job.next_run_at is not None
    assert body["last_run"] is None
    assert (body["args"], body["kwargs"], body["tags"]) == ([1], {"a": 2}, ["etl"])


@pytest.mark.parametrize("schedule", [
    {"type": "interval", "every_seconds": 60},
    {"type": "once", "run_at": "2099-01-02T03:04:05+00:00"},
    {"type": "manual"},
])
def test_it_creates_each_kind_of_schedule(people, schedule):
    response = people.client(people.owner).post("/api/jobs/", new_job(schedule=schedule), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["schedule"] == schedule
    assert (response.json()["next_run_at"] is None) == (schedule["type"] == "manual")


def test_it_creates_a_manual_job_when_no_schedule_is_given(people):
    payload = {"name": "ping", "kind": "http", "target": "https://example.invalid/health"}
    response = people.client(people.owner).post("/api/jobs/", payload, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["schedule"] == {"type": "manual"}


def test_it_filters_the_job_list(people):
    client = people.client(people.owner)
    for name, kind, target, enabled, tags in [
        ("hook", "http", "https://example.invalid/", True, ["ops"]),
        ("paused", "callable", "builtin.noop", False, ["ops", "reports"]),
    ]:
        payload = new_job(name=name, kind=kind, target=target, enabled=enabled, tags=tags)
        assert client.post("/api/jobs/", payload, format="json").status_code == 201

    def names(query):
        response = client.get(f"/api/jobs/?{query}")
        assert response.status_code == 200, response.json()
        return [job["name"] for job in response.json()["results"]]

    assert names("") == ["hook", "nightly-report", "paused"]
    assert names("name=hook") == ["hook"]
    assert names("enabled=false") == ["paused"]
    assert names("kind=http") == ["hook"]
    assert names("tag=reports") == ["nightly-report", "paused"]
    assert names("tag=ops&enabled=true") == ["hook"]
    assert client.get("/api/jobs/?enabled=maybe").json() == {"enabled": ["Must be true or false."]}
    assert "kind" in client.get("/api/jobs/?kind=shell").json()


def test_it_shows_one_job_with_its_last_run(people):
    client = people.client(people.owner)
    run = client.post(f"/api/jobs/{people.job.pk}/run/").json()
    body = client.get(f"/api/jobs/{people.job.pk}/").json()
    assert body["last_run"] == {"id": run["id"], "status": "queued", "scheduled_for": run["scheduled_for"],
                                "finished_at": None}
    assert body["schedule"] == {"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Berlin"}


def test_it_keeps_the_schedule_on_a_patch_without_one(people):
    before = people.job.next_run_at
    response = people.client(people.owner).patch(f"/api/jobs/{people.job.pk}/", {"description": "daily"},
                                                 format="json")
    assert response.status_code == 200, response.json()
    people.job.refresh_from_db()
    assert people.job.description == "daily"
    assert people.job.cron_expression == "0 3 * * *" and people.job.next_run_at == before


def test_it_reapplies_a_patched_schedule(people):
    response = people.client(people.owner).patch(
        f"/api/jobs/{people.job.pk}/", {"schedule": {"type": "interval", "every_seconds": 300}}, format="json")
    assert response.status_code == 200, response.json()
    people.job.refresh_from_db()
    assert people.job.schedule_type == "interval" and people.job.crontab is None
    assert response.json()["next_run_at"] == people.job.next_run_at.isoformat().replace("+00:00", "Z")


def test_it_restarts_the_schedule_when_a_patch_enables_the_job(people):
    client, url = people.client(people.owner), f"/api/jobs/{people.job.pk}/"
    assert client.patch(url, {"enabled": False}, format="json").json()["enabled"] is False
    Job.objects.filter(pk=people.job.pk).update(next_run_at=None)
    response = client.patch(url, {"enabled": True}, format="json")
    assert response.status_code == 200 and response.json()["next_run_at"] is not None


def test_it_replaces_a_job_with_put(people):
    payload = new_job(name="nightly-report", kind="http", target="https://example.invalid/report",
                      http_method="POST", schedule={"type": "manual"})
    response = people.client(people.owner).put(f"/api/jobs/{people.job.pk}/", payload, format="json")
    assert response.status_code == 200, response.json()
    people.job.refresh_from_db()
    assert (people.job.kind, people.job.http_method, people.job.next_run_at) == ("http", "POST", None)


def test_it_deletes_a_job(people):
    assert people.client(people.owner).delete(f"/api/jobs/{people.job.pk}/").status_code == 204
    assert not Job.objects.filter(pk=people.job.pk).exists()


@pytest.mark.parametrize("fields, field", [
    ({"schedule": {"type": "cron", "cron": "61 * * * *"}}, "schedule"),
    ({"schedule": {"type": "cron", "cron": "* * * * *", "timezone": "Mars/Olympus"}}, "schedule"),
    ({"schedule": {"type": "cron", "cron": "* * * * *", "every_seconds": 5}}, "schedule"),
    ({"schedule": "every 5 minutes"}, "schedule"),
    ({"schedule": {"type": "interval", "every_seconds": 0}}, "schedule"),
    ({"schedule": {"type": "once", "run_at": "tomorrow"}}, "schedule"),
    ({"schedule": {"type": "once", "run_at": "0001-01-01T00:00:00+05:00"}}, "schedule"),
    ({"schedule": {"type": "cron", "cron": "0 0 31 2 *"}}, "schedule"),
    ({"schedule": {"type": "cron", "cron": "0 0 * * *", "timezone": 5}}, "schedule"),
    ({"schedule": {"type": "interval", "every_seconds": 10**12}}, "schedule"),
    ({"target": "no.such.function"}, "target"),
    ({"kind": "http", "target": "ftp://example.com/file"}, "target"),
    ({"kind": "shell"}, "kind"),
    ({"timeout_seconds": 0}, "timeout_seconds"),
    ({"timeout_seconds": -5}, "timeout_seconds"),
    ({"timeout_seconds": 10**9}, "timeout_seconds"),
    ({"name": "nightly-report"}, "name"),
    ({"args": "a b"}, "args"),
    ({"kwargs": [1, 2]}, "kwargs"),
    ({"tags": "reports"}, "tags"),
    ({"group": "others"}, "group"),
    ({"group": "nobody-has-this"}, "group"),
])
def test_it_rejects_bad_input_field_by_field(people, fields, field):
    crontabs = CrontabSchedule.objects.count()
    response = people.client(people.owner).post("/api/jobs/", new_job(**fields), format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert Job.objects.count() == 1 and CrontabSchedule.objects.count() == crontabs


def test_it_names_the_part_of_a_bad_schedule(people):
    response = people.client(people.owner).post(
        "/api/jobs/", new_job(schedule={"type": "cron", "cron": "61 * * * *", "timezone": "Nowhere"}),
        format="json")
    assert set(response.json()["schedule"]) == {"cron", "timezone"}


def test_it_saves_nothing_of_a_bad_patch(people):
    response = people.client(people.owner).patch(
        f"/api/jobs/{people.job.pk}/",
        {"description": "changed", "schedule": {"type": "interval", "every_seconds": 300}, "target": "nope"},
        format="json")
    assert response.status_code == 400 and "target" in response.json()
    people.job.refresh_from_db()
    assert people.job.description == "" and people.job.schedule_type == "cron"


def test_it_rejects_a_body_over_256_kb(people):
    payload = json.dumps(new_job(description="x" * (300 * 1024)))
    response = people.client(people.owner).post("/api/jobs/", payload, content_type="application/json")
    assert response.status_code == 413
    assert Job.objects.count() == 1


def test_it_lets_only_privileged_users_manage_command_jobs(people):
    command = new_job(name="backup", kind="command", target="echo hi", schedule={"type": "manual"})
    assert people.client(people.owner).post("/api/jobs/", command, format="json").status_code == 403
    assert people.client(people.staff).post("/api/jobs/", command, format="json").status_code == 403
    assert not Job.objects.filter(name="backup").exists()

    created = people.client(people.runner).post("/api/jobs/", {**command, "group": "team"}, format="json")
    assert created.status_code == 201, created.json()
    url = f"/api/jobs/{created.json()['id']}/"
    teammate = people.client(people.teammate)
    assert teammate.get(url).status_code == 200
    assert teammate.patch(url, {"target": "rm -rf /"}, format="json").status_code == 403
    assert teammate.delete(url).status_code == 403
    assert teammate.patch(f"/api/jobs/{people.job.pk}/", {"kind": "command"}, format="json").status_code == 403
    for verb in ("run", "pause", "resume"):
        assert teammate.post(f"{url}{verb}/").status_code == 403
    assert not JobRun.objects.filter(job__name="backup").exists()

    people.teammate.user_permissions.add(Permission.objects.get(codename="change_job"))
    teammate = people.client(User.objects.get(pk=people.teammate.pk))  # a fresh permission cache
    assert teammate.patch(url, {"target": "echo bye"}, format="json").status_code == 403  # change_job is not enough
    people.teammate.user_permissions.add(Permission.objects.get(codename="run_command_jobs"))
    teammate = people.client(User.objects.get(pk=people.teammate.pk))
    assert teammate.patch(url, {"target": "echo bye"}, format="json").status_code == 200
    assert Job.objects.get(name="backup").target == "echo bye"


def test_it_rejects_command_jobs_when_commands_are_switched_off(people, settings):
    settings.JOBS_COMMANDS_ENABLED = False
    command = new_job(name="backup", kind="command", target="echo hi")
    response = people.client(people.runner).post("/api/jobs/", command, format="json")
    assert response.status_code == 400 and "kind" in response.json()
    assert not Job.objects.filter(name="backup").exists()


def test_it_hides_a_job_from_an_outsider(people):
    outsider, url = people.client(people.outsider), f"/api/jobs/{people.job.pk}/"
    assert outsider.get("/api/jobs/").json()["results"] == []
    assert outsider.get(url).status_code == 404
    assert outsider.patch(url, {"description": "mine"}, format="json").status_code == 404
    assert outsider.delete(url).status_code == 404
    for verb in ("run", "pause", "resume"):
        assert outsider.post(f"{url}{verb}/").status_code == 404
    assert not JobRun.objects.exists()
    people.job.refresh_from_db()
    assert people.job.enabled and people.job.description == ""


def test_it_lets_a_teammate_see_and_run_the_job(people):
    teammate = people.client(people.teammate)
    assert [job["id"] for job in teammate.get("/api/jobs/").json()["results"]] == [people.job.pk]
    assert teammate.post(f"/api/jobs/{people.job.pk}/run/").status_code == 202
    assert JobRun.objects.get().triggered_by == people.teammate


def test_it_shows_staff_every_job(people):
    people.client(people.outsider).post("/api/jobs/", new_job(name="outsiders-job"), format="json")
    names = [job["name"] for job in people.client(people.staff).get("/api/jobs/").json()["results"]]
    assert names == ["nightly-report", "outsiders-job"]


def test_it_runs_a_job_now_with_202_and_a_location(people):
    response = people.client(people.owner).post(f"/api/jobs/{people.job.pk}/run/")
    assert response.status_code == 202
    run = JobRun.objects.get()
    assert response["Location"].endswith(f"/api/runs/{run.pk}/")
    assert response.json()["id"] == run.pk and response.json()["status"] == "queued"
    assert (run.status, run.trigger, run.job_id) == (RunStatus.QUEUED, RunTrigger.MANUAL, people.job.pk)


def test_it_pauses_and_resumes_a_schedule(people):
    client, url = people.client(people.owner), f"/api/jobs/{people.job.pk}/"
    paused = client.post(f"{url}pause/")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    people.job.refresh_from_db()
    assert not people.job.enabled

    resumed = client.post(f"{url}resume/")
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True
    people.job.refresh_from_db()
    assert people.job.enabled and people.job.next_run_at is not None
    assert resumed.json()["schedule"]["cron"] == "0 3 * * *"
