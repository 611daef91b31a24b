"""Quotas that count every way in, tried by users who are not staff through the real API and pages:
workflows count and are held to the shortest interval (H1), a clone is the actor's, counted, and
carries no secret (M2), runs are bounded per hour and in flight (M3: a 429 naming the quota), a team's
quotas set by staff bound its members, and a job's retries, timeouts and priority have bounds."""

from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, TeamQuota
from workflows.models import Workflow


def flow(name, schedule=None, nodes=("owners-job",)):
    return {"name": name, "nodes": list(nodes), "edges": [], "schedule": schedule or {"type": "manual"}}


def new_job(name, **fields):
    return {"name": name, "kind": "callable", "target": "builtin.noop", "schedule": {"type": "manual"}, **fields}


def test_a_user_owns_at_most_the_quota_of_workflows(people, owned_job, settings):
    settings.JOBS_MAX_WORKFLOWS_PER_USER = 3
    api = people.api(people.owner)
    for n in range(3):
        assert api.post("/api/workflows/", flow(f"flow-{n}"), format="json").status_code == 201

    refused = api.post("/api/workflows/", flow("flow-3"), format="json")

    assert refused.status_code == 400
    assert refused.json() == {"non_field_errors": [
        "You own 3 workflow(s) and may own at most 3 (JOBS_MAX_WORKFLOWS_PER_USER): delete one first, or ask an "
        "administrator."]}
    assert Workflow.objects.filter(owner=people.owner).count() == 3
    staff = people.api(people.staff)
    assert staff.post("/api/workflows/", flow("staff-flow"), format="json").status_code == 201


def test_a_workflow_every_second_is_refused_as_a_job_is(people, owned_job, settings):
    settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = 60
    api = people.api(people.owner)
    every_second = {"type": "interval", "every_seconds": 1}

    created = api.post("/api/workflows/", flow("fast", every_second), format="json")
    slow = api.post("/api/workflows/", flow("slow", {"type": "interval", "every_seconds": 60}), format="json")
    patched = api.patch(f"/api/workflows/{slow.json()['id']}/", {"schedule": every_second}, format="json")

    message = ("Runs every 1 s; workflows of users who are not staff run at most every 60 s "
               "(JOBS_MIN_INTERVAL_SECONDS_NON_STAFF).")
    assert created.status_code == 400 and created.json() == {"schedule": {"every_seconds": [message]}}
    assert patched.status_code == 400 and patched.json() == {"schedule": {"every_seconds": [message]}}
    assert list(Workflow.objects.values_list("name", "interval__every")) == [("slow", 60)]
    staff = people.api(people.staff)
    assert staff.post("/api/workflows/", flow("staff-fast", every_second), format="json").status_code == 201


def test_a_jobs_file_with_a_fast_workflow_is_refused(people, owned_job, settings, tmp_path):
    # The API applies workflows for staff only; the command line applies them as a user with --as.
    settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = 60
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: []\nworkflows:\n- name: from-file\n  nodes: [owners-job]\n"
                    "  schedule: {type: interval, every_seconds: 1}\n")

    with pytest.raises(CommandError) as refused:
        call_command("jobs", "--as", "owner", "apply", str(path), stdout=StringIO(), stderr=StringIO())

    assert ("Runs every 1 s; workflows of users who are not staff run at most every 60 s "
            "(JOBS_MIN_INTERVAL_SECONDS_NON_STAFF).") in str(refused.value)
    assert not Workflow.objects.exists()


def test_a_clone_is_the_actors_counts_against_their_quota_and_carries_no_secret(people, owned_job, settings, client):
    settings.JOBS_MAX_JOBS_PER_USER = 1
    assert people.api(people.owner).patch(f"/api/jobs/{owned_job.pk}/", {"secret_environment": {"TOKEN": "s3cret"}},
                                          format="json").status_code == 200
    sealed = Job.objects.get(pk=owned_job.pk).secret_environment
    assert set(sealed) == {"TOKEN"}
    client.force_login(people.teammate)

    first = client.post(f"/jobs/{owned_job.pk}/clone/")
    second = client.post(f"/jobs/{owned_job.pk}/clone/", follow=True)

    copy = Job.objects.get(name="owners-job (copy)")
    assert first.status_code == 302
    assert (copy.owner, copy.group, copy.secret_environment, copy.secret_http_headers) == (
        people.teammate, people.team, {}, {})
    assert "may own at most 1 (JOBS_MAX_JOBS_PER_USER)" in second.content.decode()
    assert Job.objects.filter(owner=people.teammate).count() == 1
    assert Job.objects.get(pk=owned_job.pk).secret_environment == sealed


def test_a_clone_keeps_the_team_only_of_a_member(people, settings, client):
    job = save_job(Job(name="moved-away", kind="callable", target="builtin.noop", owner=people.teammate,
                       group=people.others), {"type": "manual"})
    client.force_login(people.teammate)

    assert client.post(f"/jobs/{job.pk}/clone/").status_code == 302

    copy = Job.objects.get(name="moved-away (copy)")
    assert (copy.owner, copy.group) == (people.teammate, None)


def test_run_now_past_the_quota_of_runs_an_hour_is_429(people, owned_job, settings):
    settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER = 3
    settings.JOBS_MAX_RUNS_IN_FLIGHT_PER_USER = 0
    api = people.api(people.owner)
    for _ in range(3):
        assert api.post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202

    refused = api.post(f"/api/jobs/{owned_job.pk}/run/")

    assert refused.status_code == 429
    assert refused.json() == {"detail": "You started 3 run(s) in the last hour; at most 3 per hour "
                                        "(JOBS_MAX_RUNS_PER_HOUR_PER_USER)."}
    assert JobRun.objects.filter(job=owned_job).count() == 3
    assert people.api(people.teammate).post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202  # their own quota
    assert people.api(people.staff).post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202


def test_a_workflow_run_and_a_backfill_count_as_runs_started(people, owned_job, settings):
    settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER = 1
    settings.JOBS_MAX_RUNS_IN_FLIGHT_PER_USER = 0
    api = people.api(people.owner)
    workflow = api.post("/api/workflows/", flow("flow"), format="json").json()
    assert api.post(f"/api/workflows/{workflow['id']}/run/").status_code == 202

    again = api.post(f"/api/workflows/{workflow['id']}/run/")
    backfill = api.post(f"/api/jobs/{owned_job.pk}/backfill/", {"start": "2026-01-01T00:00:00Z",
                                                                "end": "2026-01-02T00:00:00Z"}, format="json")
    run_now = api.post(f"/api/jobs/{owned_job.pk}/run/")

    assert [again.status_code, backfill.status_code, run_now.status_code] == [429, 429, 429]
    assert "(JOBS_MAX_RUNS_PER_HOUR_PER_USER)" in again.json()["detail"]
    assert JobRun.objects.count() == 1


def test_run_now_past_the_quota_of_runs_in_flight_is_429(people, owned_job, settings):
    settings.JOBS_MAX_RUNS_IN_FLIGHT_PER_USER = 2
    api = people.api(people.owner)
    assert api.post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202
    lifecycle.create_run(owned_job, user=None)  # a run of their job that someone else started

    refused = api.post(f"/api/jobs/{owned_job.pk}/run/")

    assert refused.status_code == 429
    assert refused.json() == {"detail": "2 run(s) of your jobs or started by you have not ended; at most 2 at once "
                                        "(JOBS_MAX_RUNS_IN_FLIGHT_PER_USER)."}
    JobRun.objects.filter(job=owned_job).update(status=RunStatus.SUCCEEDED)
    assert api.post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202


def test_staff_set_a_teams_quotas_that_bound_its_members(people, owned_job):
    staff, teammate = people.api(people.staff), people.api(people.teammate)

    refused = teammate.post("/api/quotas/", {"team": "team", "max_jobs": 1000}, format="json")
    created = staff.post("/api/quotas/", {"team": "team", "max_jobs": 2, "max_runs_in_flight": 1}, format="json")

    assert refused.status_code == 403
    assert created.status_code == 201
    assert created.json() | {"updated_at": None} == {"id": created.json()["id"], "team": "team", "max_jobs": 2,
                                                     "max_workflows": None, "max_runs_per_hour": None,
                                                     "max_runs_in_flight": 1, "updated_at": None}
    assert teammate.post("/api/jobs/", new_job("second", group="team"), format="json").status_code == 201
    over = teammate.post("/api/jobs/", new_job("third", group="team"), format="json")
    assert over.status_code == 400
    assert over.json() == {"non_field_errors": [
        "The team team has 2 job(s) and may have at most 2 (its team quota max_jobs): delete one first, or ask an "
        "administrator."]}
    assert teammate.post("/api/jobs/", new_job("mine-alone"), format="json").status_code == 201  # no team: not counted
    assert teammate.post(f"/api/jobs/{owned_job.pk}/run/").status_code == 202
    busy = people.api(people.owner).post(f"/api/jobs/{owned_job.pk}/run/")
    assert busy.status_code == 429
    assert busy.json()["detail"] == ("1 run(s) of the team team's jobs have not ended; at most 1 at once "
                                     "(its team quota max_runs_in_flight).")
    assert people.api(people.outsider).post("/api/jobs/", new_job("elsewhere"), format="json").status_code == 201

    raised = staff.patch(f"/api/quotas/{created.json()['id']}/", {"max_jobs": 10}, format="json")
    assert raised.status_code == 200 and TeamQuota.objects.get().max_jobs == 10
    assert teammate.post("/api/jobs/", new_job("third", group="team"), format="json").status_code == 201
    entries = AuditEntry.objects.filter(subject="quota").order_by("pk")
    assert [(e.job_name, e.action, e.changes, e.actor) for e in entries] == [
        ("team", "create", {"max_jobs": [None, 2], "max_runs_in_flight": [None, 1]}, people.staff),
        ("team", "change", {"max_jobs": [2, 10]}, people.staff)]


def test_a_user_reads_only_their_own_teams_quotas(people):
    TeamQuota.objects.create(group=people.team, max_jobs=5)
    others = TeamQuota.objects.create(group=people.others, max_jobs=7)

    assert [q["team"] for q in people.api(people.teammate).get("/api/quotas/").json()["results"]] == ["team"]
    assert people.api(people.teammate).get(f"/api/quotas/{others.pk}/").status_code == 404
    assert people.api(people.teammate).patch(f"/api/quotas/{others.pk}/", {"max_jobs": 1000},
                                             format="json").status_code == 404
    assert [q["team"] for q in people.api(people.staff).get("/api/quotas/").json()["results"]] == ["others", "team"]
    assert TeamQuota.objects.get(pk=others.pk).max_jobs == 7


def test_a_jobs_retries_timeouts_and_priority_are_bounded_for_users_who_are_not_staff(people, owned_job):
    api = people.api(people.owner)
    body = new_job("greedy", max_retries=100, timeout_seconds=6 * 3600, sla_seconds=7200, priority=9,
                   retry_backoff_seconds=0)

    refused = api.post("/api/jobs/", body, format="json")
    patched = api.patch(f"/api/jobs/{owned_job.pk}/", {"priority": 9}, format="json")

    assert refused.status_code == 400 and patched.status_code == 400
    assert refused.json() == {
        "max_retries": ["At most 10 for users who are not staff (JOBS_MAX_RETRIES_NON_STAFF)."],
        "timeout_seconds": ["At most 3600 for users who are not staff (JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF)."],
        "sla_seconds": ["At most 3600 for users who are not staff (JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF)."],
        "priority": ["At most 5 for users who are not staff (JOBS_MAX_PRIORITY_NON_STAFF)."],
        "retry_backoff_seconds": ["At least 1 for users who are not staff (JOBS_MIN_RETRY_BACKOFF_SECONDS_NON_STAFF)."],
    }
    assert patched.json() == {"priority": ["At most 5 for users who are not staff (JOBS_MAX_PRIORITY_NON_STAFF)."]}
    assert not Job.objects.filter(name="greedy").exists()
    assert Job.objects.get(pk=owned_job.pk).priority == 5
    assert api.post("/api/jobs/", new_job("modest", max_retries=10, timeout_seconds=3600, priority=5,
                                          retry_backoff_seconds=1), format="json").status_code == 201
    assert people.api(people.staff).post("/api/jobs/", body, format="json").status_code == 201


def test_a_jobs_file_is_held_to_the_same_bounds(people):
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    text = "jobs:\n- name: from-file\n  kind: callable\n  target: builtin.noop\n  max_retries: 50\n"

    response = people.api(people.owner).post("/api/jobs-as-code/", {"text": text}, format="json")

    assert response.status_code == 400
    assert "At most 10 for users who are not staff (JOBS_MAX_RETRIES_NON_STAFF)." in str(response.json())
    assert not Job.objects.filter(name="from-file").exists()


BAD_QUOTAS = [
    ({"team": "team", "max_jobs": 10**30}, "max_jobs"),
    ({"team": "team", "max_jobs": "many"}, "max_jobs"),
    ({"team": "team", "max_workflows": 10**30}, "max_workflows"),
    ({"team": "team", "max_workflows": [1]}, "max_workflows"),
    ({"team": "team", "max_runs_per_hour": 10**30}, "max_runs_per_hour"),
    ({"team": "team", "max_runs_per_hour": -1}, "max_runs_per_hour"),
    ({"team": "team", "max_runs_in_flight": 10**30}, "max_runs_in_flight"),
    ({"team": "team", "max_runs_in_flight": "1.5"}, "max_runs_in_flight"),
    ({"team": "no such team"}, "team"),
    ({"team": "te\x00am"}, "team"),
    ({"team": ["team"]}, "team"),
]


def test_bad_quotas_are_400_naming_the_field(people):
    staff = people.api(people.staff)
    for body, field in BAD_QUOTAS:
        response = staff.post("/api/quotas/", body, format="json")
        assert response.status_code == 400, body
        assert list(response.json()) == [field], body
    assert not TeamQuota.objects.exists()
    made = staff.post("/api/quotas/", {"team": "team"}, format="json")
    assert staff.post("/api/quotas/", {"team": "team"}, format="json").status_code == 400  # one row per team
    for body, field in BAD_QUOTAS[:8]:
        response = staff.patch(f"/api/quotas/{made.json()['id']}/", body, format="json")
        assert response.status_code == 400 and list(response.json()) == [field], body


def test_the_command_line_as_a_user_is_held_to_the_runs_quota(people, owned_job, settings):
    settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER = 1
    call_command("jobs", "--as", "owner", "run", "owners-job", stdout=StringIO())

    with pytest.raises(CommandError, match=r"at most 1 per hour \(JOBS_MAX_RUNS_PER_HOUR_PER_USER\)"):
        call_command("jobs", "--as", "owner", "run", "owners-job", stdout=StringIO())

    call_command("jobs", "run", "owners-job", stdout=StringIO())  # the operator has no quota
    assert JobRun.objects.count() == 2


def test_staff_set_a_teams_quotas_in_the_admin_and_each_change_is_audited(people, admin_client):
    form = {"group": people.team.pk, "max_jobs": "1", "max_workflows": "", "max_runs_per_hour": "",
            "max_runs_in_flight": ""}

    assert admin_client.post("/admin/jobs/teamquota/add/", form).status_code == 302
    quota = TeamQuota.objects.get()
    assert admin_client.post(f"/admin/jobs/teamquota/{quota.pk}/change/", {**form, "max_jobs": "0"}).status_code == 302

    assert TeamQuota.objects.get().max_jobs == 0
    assert [(e.action, e.changes) for e in AuditEntry.objects.filter(subject="quota").order_by("pk")] == [
        ("create", {"max_jobs": [None, 1]}), ("change", {"max_jobs": [1, 0]})]
    refused = people.api(people.teammate).post("/api/jobs/", new_job("any", group="team"), format="json")
    assert refused.status_code == 400
    assert "may have at most 0 (its team quota max_jobs)" in refused.json()["non_field_errors"][0]
