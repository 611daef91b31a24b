"""/api/limits/: limits shared across jobs, read by everyone logged in, changed by staff (each change
in the audit trail); a job's limit_key; a run turned away by its limit waits, and says so."""

from datetime import UTC, datetime

import pytest
import time_machine

from audit.models import AuditEntry, Subject
from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, Limit, RunStatus, RunTrigger


def make_limit(key="warehouse", max_running=1, **fields):
    """A shared limit, as every limit made before teams is (the migration)."""
    return Limit.objects.create(key=key, max_running=max_running, **{"shared": True, **fields})


def limited(name, key="warehouse", owner=None, **fields):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", limit_key=key, owner=owner, **fields),
                    {"type": "manual"})


def claim(run):
    return lifecycle.claim(run.pk, run.attempt, "w1@host", 4321)


# --- the API


def test_staff_define_a_limit_and_the_trail_says_who(people):
    answer = people.client(people.staff).post(
        "/api/limits/", {"key": "warehouse", "max_running": 3, "max_starts_per_minute": 10}, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json() | {"id": None, "created_at": None, "updated_at": None} == {
        "id": None, "key": "warehouse", "max_running": 3, "max_starts_per_minute": 10, "description": "",
        "owner": "staff", "group": None, "shared": False, "running": 0, "waiting": 0, "jobs": 0, "job_names": [],
        "created_at": None, "updated_at": None}
    entry = AuditEntry.objects.get(subject=Subject.LIMIT)
    assert (entry.job_name, entry.action, entry.actor, entry.source) == ("warehouse", "create", people.staff, "api")
    assert entry.changes["max_running"] == [None, 3]


def test_everyone_reads_shared_limits_but_only_staff_change_them(people):
    limit = make_limit()
    client = people.client(people.owner)
    assert client.get("/api/limits/").json()["results"][0]["key"] == "warehouse"
    assert client.get("/api/limits/warehouse/").json()["max_running"] == 1
    for answer in (client.patch("/api/limits/warehouse/", {"max_running": 50}, format="json"),
                   client.delete(f"/api/limits/{limit.pk}/")):
        assert answer.status_code == 403
        assert "Only staff may change or delete a shared limit" in answer.json()["detail"]
    limit.refresh_from_db()
    assert limit.max_running == 1 and Limit.objects.count() == 1
    assert not AuditEntry.objects.filter(subject=Subject.LIMIT).exists()
    assert people.client(None).get("/api/limits/").status_code in (401, 403)
    mine = client.post("/api/limits/", {"key": "mine", "max_running": 5}, format="json")
    assert mine.status_code == 201 and mine.json()["owner"] == "owner"


@pytest.mark.parametrize(("body", "field"), [
    ({"key": "not a slug!", "max_running": 1}, "key"),
    ({"key": "k" * 101, "max_running": 1}, "key"),
    ({"key": "ok", "max_running": 0}, "max_running"),
    ({"key": "ok", "max_running": "three"}, "max_running"),
    ({"key": "ok", "max_running": 10**30}, "max_running"),
    ({"key": "ok", "max_running": 1, "max_starts_per_minute": -1}, "max_starts_per_minute"),
    ({"key": "ok", "max_running": 1, "max_starts_per_minute": 10**6}, "max_starts_per_minute"),
    ({"key": "ok", "max_running": 1, "description": "nul \x00 here"}, "description"),
    ({"key": "ok'; DROP TABLE jobs_limit; --", "max_running": 1}, "key"),
    ({"max_running": 1}, "key"),
])
def test_bad_values_are_refused_naming_the_field(people, body, field):
    people.staff_post_refused("/api/limits/", body, field, Limit)


def test_a_key_is_unique_and_a_body_must_be_an_object(people):
    make_limit()
    client = people.client(people.staff)
    assert "key" in client.post("/api/limits/", {"key": "warehouse", "max_running": 2}, format="json").json()
    assert client.post("/api/limits/", [1, 2], format="json").status_code == 400
    huge = client.post("/api/limits/", {"key": "big", "max_running": 1, "description": "x" * 300_000}, format="json")
    assert huge.status_code == 413
    assert Limit.objects.count() == 1


def test_a_limit_is_found_by_key_or_id_and_changed_with_an_entry(people):
    limit = make_limit()
    client = people.client(people.staff)
    assert client.get(f"/api/limits/{limit.pk}/").json()["key"] == "warehouse"
    assert client.get("/api/limits/nowhere/").status_code == 404
    assert client.get("/api/limits/99999999999999999999999/").status_code == 404
    answer = client.patch("/api/limits/warehouse/", {"max_running": 4, "max_starts_per_minute": None}, format="json")
    assert answer.status_code == 200 and answer.json()["max_running"] == 4
    entry = AuditEntry.objects.get(subject=Subject.LIMIT, action="change")
    assert entry.changes == {"max_running": [1, 4]}


def test_a_limit_named_by_jobs_is_neither_deleted_nor_renamed(people):
    limit = make_limit()
    limited("loader", owner=people.owner)
    client = people.client(people.staff)
    renamed = client.patch("/api/limits/warehouse/", {"key": "lake"}, format="json")
    deleted = client.delete("/api/limits/warehouse/")
    assert renamed.status_code == deleted.status_code == 409
    assert "loader" in deleted.json()["detail"]
    assert Limit.objects.get(pk=limit.pk).key == "warehouse"
    Job.objects.filter(name="loader").update(limit_key="")
    assert client.delete("/api/limits/warehouse/").status_code == 204
    assert AuditEntry.objects.filter(subject=Subject.LIMIT, action="delete", job_name="warehouse").exists()


def test_a_job_may_only_name_a_limit_that_exists(people):
    client = people.client(people.owner)
    job = people.job
    unknown = client.patch(f"/api/jobs/{job.pk}/", {"limit_key": "nowhere"}, format="json")
    assert unknown.status_code == 400
    assert "No limit has the key 'nowhere'" in unknown.json()["limit_key"][0]
    make_limit()
    assert client.patch(f"/api/jobs/{job.pk}/", {"limit_key": "warehouse"}, format="json").json()["limit_key"] == "warehouse"
    other = people.client(people.outsider).patch(f"/api/jobs/{job.pk}/", {"limit_key": ""}, format="json")
    assert other.status_code == 404


# --- waiting


def test_a_run_over_its_limit_waits_and_says_so(people, django_capture_on_commit_callbacks):
    make_limit(max_running=1)
    first = lifecycle.create_run(limited("a", owner=people.owner))
    second = lifecycle.create_run(limited("b", owner=people.owner))
    assert claim(first) is not None

    assert claim(second) is None
    second.refresh_from_db()
    assert second.status == RunStatus.QUEUED and second.waiting_since is not None
    answer = people.client(people.owner).get(f"/api/runs/{second.pk}/").json()
    assert answer["waiting_for"] == "waiting for warehouse (1 of 1 running)"
    assert people.client(people.owner).get("/api/runs/", {"status": "queued"}).json()["results"][0]["waiting_for"] \
        == "waiting for warehouse (1 of 1 running)"
    assert people.client(people.outsider).get(f"/api/runs/{second.pk}/").status_code == 404
    shown = people.client(people.staff).get("/api/limits/warehouse/").json()
    assert (shown["running"], shown["waiting"]) == (1, 1)

    published = second.publish_count
    with django_capture_on_commit_callbacks() as after_commit:
        assert lifecycle.record_success(first.pk, 1)
    assert any("wake" in repr(callback) for callback in after_commit)
    # What that callback does once the end commits (the test's transaction never commits):
    assert lifecycle.wake_waiting("warehouse") == 1
    second.refresh_from_db()
    assert second.publish_count == published + 1  # woken: published again, to be claimed anew
    assert claim(second) is not None
    second.refresh_from_db()
    assert second.waiting_since is None and second.waited_seconds > 0
    assert people.client(people.owner).get(f"/api/runs/{second.pk}/").json()["waiting_for"] is None


def test_waiting_runs_start_by_priority_then_slot_and_newcomers_queue_behind(people):
    make_limit(max_running=1)
    low, high = limited("low", priority=2), limited("high", priority=8)
    running = lifecycle.create_run(low)
    claim(running)
    early_low, late_high = lifecycle.create_run(low), lifecycle.create_run(high)
    assert claim(early_low) is None and claim(late_high) is None

    lifecycle.record_success(running.pk, 1)
    assert lifecycle.wake_waiting("warehouse") == 1
    assert claim(early_low) is None  # the more urgent job's run is ahead of it
    assert claim(late_high) is not None
    newcomer = lifecycle.create_run(low)
    lifecycle.record_success(late_high.pk, 1)
    assert claim(newcomer) is None  # a waiting run of the limit came first
    assert claim(early_low) is not None


def test_a_lost_attempt_frees_its_room(people):
    make_limit(max_running=1)
    job = limited("a")
    held, waiting = lifecycle.create_run(job), lifecycle.create_run(job)
    claim(held)
    assert claim(waiting) is None
    assert lifecycle.record_failure(held.pk, 1, "Lost: no heartbeat", lost=True) == RunStatus.QUEUED
    assert claim(waiting) is not None  # the room the lost attempt held
    held.refresh_from_db()
    assert claim(held) is None


def test_a_cancelled_waiting_run_leaves_the_line(people):
    make_limit(max_running=1)
    job = limited("a", owner=people.owner)
    held, waiting = lifecycle.create_run(job), lifecycle.create_run(job)
    claim(held)
    claim(waiting)
    assert people.client(people.owner).post(f"/api/runs/{waiting.pk}/cancel/").status_code == 200
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.CANCELLED
    assert people.client(people.owner).get(f"/api/runs/{waiting.pk}/").json()["waiting_for"] is None
    assert lifecycle.wake_waiting("warehouse") == 0


def test_a_rate_limit_turns_away_a_start_past_its_minute(people):
    make_limit(max_running=10, max_starts_per_minute=2)
    job = limited("a", owner=people.owner)
    runs = [lifecycle.create_run(job) for _ in range(3)]
    assert claim(runs[0]) is not None and claim(runs[1]) is not None
    assert claim(runs[2]) is None
    answer = people.client(people.owner).get(f"/api/runs/{runs[2].pk}/").json()
    assert answer["waiting_for"] == "waiting for warehouse (2 of 2 starts in the last minute)"
    assert lifecycle.wake_waiting("warehouse") == 0  # the minute has not passed


def test_raising_a_limit_wakes_its_waiting_runs(people):
    make_limit(max_running=1)
    job = limited("a")
    held, waiting = lifecycle.create_run(job), lifecycle.create_run(job)
    claim(held)
    claim(waiting)
    published = JobRun.objects.get(pk=waiting.pk).publish_count
    people.client(people.staff).patch("/api/limits/warehouse/", {"max_running": 2}, format="json")
    # The wake runs once the change commits (run here by hand: the test's transaction never does).
    assert lifecycle.wake_waiting("warehouse") == 1
    assert JobRun.objects.get(pk=waiting.pk).publish_count == published + 1


def test_why_says_a_slot_waits_for_its_limit(people):
    make_limit(max_running=1)
    with time_machine.travel("2026-11-20T00:00:00Z", tick=False):
        job = save_job(Job(name="hourly", kind="callable", target="builtin.noop", owner=people.owner,
                           limit_key="warehouse"), {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    slot = datetime(2026, 11, 20, 1, tzinfo=UTC)
    lifecycle.create_runs([(job, slot, RunStatus.QUEUED, "", None)], slot, trigger=RunTrigger.SCHEDULE)
    holder = lifecycle.create_run(limited("other"))
    claim(holder)
    run = JobRun.objects.get(job=job, scheduled_for=slot)
    assert claim(run) is None
    with time_machine.travel("2026-11-20T01:00:30Z", tick=False):
        answer = people.client(people.owner).get(f"/api/jobs/{job.pk}/why/", {"at": "2026-11-20T01:00Z"})
    assert answer.json()["explanation"] == (f"It ran: run #{run.pk} (schedule) for 2026-11-20 01:00:00 UTC is queued, "
                                            "waiting for warehouse (1 of 1 running).")
