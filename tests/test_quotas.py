"""Quotas of users who are not staff (jobs.actions), through the API, the pages and jobs-as-code:
jobs owned (JOBS_MAX_JOBS_PER_USER), the shortest interval (JOBS_MIN_INTERVAL_SECONDS_NON_STAFF) and
runs created by backfill in any 24 hours (JOBS_MAX_BACKFILL_RUNS_PER_DAY). Each refusal is a 400 that
names the field and the setting, and saves nothing; staff have no quota."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils.html import escape

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunTrigger

from .api_personas import browser

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 11, 20, tzinfo=UTC)
HOURLY = {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"}


def new_job(name, schedule=None):
    return {"name": name, "kind": "callable", "target": "builtin.noop", "schedule": schedule or {"type": "manual"}}


def owned(user):
    return set(Job.objects.filter(owner=user).values_list("name", flat=True))


def test_a_user_owns_at_most_the_quota_of_jobs_and_another_users_jobs_do_not_count(people, settings):
    settings.JOBS_MAX_JOBS_PER_USER = 3
    for n in range(3):  # the outsider is at the quota: it is theirs, not the owner's
        save_job(Job(name=f"outsiders-{n}", kind="callable", target="builtin.noop", owner=people.outsider))
    api = people.client(people.owner)
    assert owned(people.owner) == {"nightly-report"}

    assert api.post("/api/jobs/", new_job("second"), format="json").status_code == 201
    assert api.post("/api/jobs/", new_job("third"), format="json").status_code == 201
    refused = api.post("/api/jobs/", new_job("fourth"), format="json")

    assert refused.status_code == 400
    assert refused.json() == {"non_field_errors": [
        "You own 3 job(s) and may own at most 3 (JOBS_MAX_JOBS_PER_USER): delete one first, or ask an administrator."]}
    assert owned(people.owner) == {"nightly-report", "second", "third"}
    assert people.client(people.outsider).post("/api/jobs/", new_job("over"), format="json").status_code == 400
    staff = people.client(people.staff)
    for n in range(4):
        assert staff.post("/api/jobs/", new_job(f"staff-{n}"), format="json").status_code == 201


def test_the_pages_refuse_a_job_or_a_copy_past_the_quota_and_save_nothing(people, settings):
    settings.JOBS_MAX_JOBS_PER_USER = 1  # the owner has nightly-report
    page = browser(people.owner)
    form = {"name": "another", "kind": "callable", "target": "builtin.noop", "schedule_type": "manual",
            "timezone": "UTC", "timeout_seconds": "3600", "enabled": "on", "max_retries": "0",
            "retry_backoff_seconds": "10", "retry_backoff_max_seconds": "3600", "catchup_policy": "latest",
            "catchup_max": "1", "overlap_policy": "allow", "priority": "5", "queue": "jobs"}

    created = page.post("/jobs/new/", form)
    cloned = page.post(f"/jobs/{people.job.pk}/clone/", follow=True)

    assert created.status_code == 400
    assert escape("may own at most 1 (JOBS_MAX_JOBS_PER_USER)") in created.content.decode()
    assert escape("may own at most 1 (JOBS_MAX_JOBS_PER_USER)") in cloned.content.decode()
    assert owned(people.owner) == {"nightly-report"}


def test_schedules_of_users_who_are_not_staff_run_at_most_every_minimum_interval(people, settings):
    settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = 60
    api = people.client(people.owner)

    refused = api.post("/api/jobs/", new_job("fast", {"type": "interval", "every_seconds": 30}), format="json")
    patched = api.patch(f"/api/jobs/{people.job.pk}/", {"schedule": {"type": "interval", "every_seconds": 10}},
                        format="json")

    assert refused.status_code == 400 and patched.status_code == 400
    message = ("Runs every 30 s; jobs of users who are not staff run at most every 60 s "
               "(JOBS_MIN_INTERVAL_SECONDS_NON_STAFF).")
    assert refused.json() == {"schedule": {"every_seconds": [message]}}
    assert list(patched.json()["schedule"]) == ["every_seconds"]
    assert owned(people.owner) == {"nightly-report"}
    people.job.refresh_from_db()
    assert people.job.schedule_type == "cron"
    assert api.post("/api/jobs/", new_job("minutely", {"type": "interval", "every_seconds": 60}),
                    format="json").status_code == 201
    assert people.client(people.staff).post("/api/jobs/", new_job("staff-fast", {"type": "interval", "every_seconds": 5}),
                                            format="json").status_code == 201


def test_a_cron_expression_is_held_to_a_minimum_interval_above_a_minute(people, settings):
    settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = 300
    api = people.client(people.owner)

    refused = api.post("/api/jobs/", new_job("two-minutely", {"type": "cron", "cron": "*/2 * * * *",
                                                              "timezone": "UTC"}), format="json")

    assert refused.status_code == 400
    assert refused.json()["schedule"]["cron"] == [
        "Runs every 120 s; jobs of users who are not staff run at most every 300 s (JOBS_MIN_INTERVAL_SECONDS_NON_STAFF)."]
    assert api.post("/api/jobs/", new_job("five-minutely", {"type": "cron", "cron": "*/5 * * * *", "timezone": "UTC"}),
                    format="json").status_code == 201
    assert owned(people.owner) == {"nightly-report", "five-minutely"}


def test_the_edit_page_names_the_interval_field(people, settings):
    settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = 60
    job = save_job(Job(name="every-hour", kind="callable", target="builtin.noop", owner=people.owner),
                   {"type": "interval", "every_seconds": 3600})
    page = browser(people.owner)
    form = {"name": "every-hour", "kind": "callable", "target": "builtin.noop", "schedule_type": "interval",
            "every_seconds": "15", "timezone": "UTC", "timeout_seconds": "3600", "enabled": "on", "max_retries": "0",
            "retry_backoff_seconds": "10", "retry_backoff_max_seconds": "3600", "catchup_policy": "latest",
            "catchup_max": "1", "overlap_policy": "allow", "priority": "5", "queue": "jobs"}

    response = page.post(f"/jobs/{job.pk}/edit/", form)

    assert response.status_code == 400
    block = response.content.decode().split('id="field-every_seconds"')[1].split('<div class="field')[0]
    assert escape("Runs every 15 s; jobs of users who are not staff run at most every 60 s") in block
    job.refresh_from_db()
    assert job.every_seconds == 3600


def backfill(client, job, start, hours, **options):
    body = {"start": start.isoformat(), "end": (start + timedelta(hours=hours)).isoformat(), **options}
    return client.post(f"/api/jobs/{job.pk}/backfill/", body, format="json")


def test_backfill_creates_at_most_the_quota_of_runs_a_day_per_user(people, settings):
    settings.JOBS_MAX_BACKFILL_RUNS_PER_DAY = 30
    job = save_job(Job(name="hourly", kind="callable", target="builtin.noop", owner=people.owner, group=people.team),
                   HOURLY)
    owner, teammate = people.client(people.owner), people.client(people.teammate)
    assert backfill(owner, job, DAY, 24).status_code == 202

    refused = backfill(owner, job, DAY + timedelta(days=1), 24)
    dry_run = backfill(owner, job, DAY + timedelta(days=1), 24, dry_run=True)

    assert refused.status_code == 400
    assert refused.json() == {"end": [
        "The range would create 24 runs; you may create 6 more by backfill today (JOBS_MAX_BACKFILL_RUNS_PER_DAY: 30 "
        "in any 24 hours). Make the range shorter, or ask an administrator."]}
    assert dry_run.status_code == 200 and dry_run.json()["to_create"] == 24
    assert JobRun.objects.filter(job=job).count() == 24
    assert backfill(owner, job, DAY + timedelta(days=1), 6).status_code == 202
    assert backfill(teammate, job, DAY + timedelta(days=2), 24).status_code == 202  # the teammate's own quota
    assert backfill(people.client(people.staff), job, DAY + timedelta(days=3), 48).status_code == 202
    made = JobRun.objects.filter(job=job, trigger=RunTrigger.BACKFILL)
    assert [made.filter(triggered_by=user).count() for user in (people.owner, people.teammate, people.staff)] == [
        30, 24, 48]


def test_the_backfill_page_says_what_is_left_of_the_quota(people, settings):
    settings.JOBS_MAX_BACKFILL_RUNS_PER_DAY = 4
    job = save_job(Job(name="hourly", kind="callable", target="builtin.noop", owner=people.owner), HOURLY)

    response = browser(people.owner).post(f"/jobs/{job.pk}/backfill/",
                                          {"from": "2026-11-20T00:00", "to": "2026-11-20T06:00", "confirm": "1"})

    assert response.status_code == 200
    assert escape("The range would create 6 runs; you may create 4 more by backfill today") in response.content.decode()
    assert not JobRun.objects.filter(job=job).exists()


def test_a_file_past_the_quota_is_refused_whole(people, settings):
    settings.JOBS_MAX_JOBS_PER_USER = 3  # the owner has nightly-report
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    text = "jobs:\n" + "".join(f"- name: from-file-{n}\n  kind: callable\n  target: builtin.noop\n" for n in range(3))

    response = people.client(people.owner).post("/api/jobs-as-code/", {"text": text}, format="json")

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["entry"] == "jobs[0]" and error["line"] == 2
    assert error["message"] == "You own 1 job(s) and may own at most 3 (JOBS_MAX_JOBS_PER_USER): 3 more would pass it."
    assert owned(people.owner) == {"nightly-report"}
    fewer = "jobs:\n" + "".join(f"- name: from-file-{n}\n  kind: callable\n  target: builtin.noop\n" for n in range(2))
    assert people.client(people.owner).post("/api/jobs-as-code/", {"text": fewer}, format="json").status_code == 200
    assert len(owned(people.owner)) == 3
