"""Rerun: a finished run runs again as itself (POST /api/runs/<id>/rerun/, the pages, jobsctl, and
the bulk POST /api/runs/rerun/): back to queued at its next attempt, the same slot and idempotency
key, its earlier attempts kept; 409 while it is queued or running; 404 for a run the user may not
see or that does not exist; counted against the quota of runs started per hour (429 naming it);
audited; and seen by notifications as a new attempt."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import Action, AuditEntry
from jobs import lifecycle
from jobs.actions import jobs as actions
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunRerun, RunStatus
from notifications.models import Delivery

from .api_personas import browser
from .conftest import wait_for
from .test_idempotency_key import key_of, keys_seen
from .test_notifications_support import channel_with_rule

QUOTA = "(JOBS_MAX_RUNS_PER_HOUR_PER_USER)"


def finished(job, status=RunStatus.FAILED, at=None):
    """A run of ``job`` that ended ``status`` at ``at`` (its slot and creation too)."""
    at = at or timezone.now()
    return JobRun.objects.create(job=job, status=status, scheduled_for=at, created_at=at, finished_at=at,
                                 started_at=at, error="it broke", worker="w1@host")


def status_of(run_id):
    return JobRun.objects.values_list("status", "attempt").get(pk=run_id)


def ended(run_id, status, timeout=40):
    wait_for(lambda: JobRun.objects.filter(pk=run_id, status=status).exists(), timeout=timeout,
             message=f"run {run_id} to be {status}")
    return JobRun.objects.get(pk=run_id)


# --- with a real worker


@pytest.mark.timeout(120)
def test_a_failed_run_rerun_succeeds_as_itself_with_its_slot_key_and_attempts_kept(processes, people, ledger,
                                                                                      tmp_path):
    marker = tmp_path / "broken"
    marker.touch()
    job = save_job(Job(name="keys", kind="callable", target="test.keys", owner=people.owner, group=people.team,
                       kwargs={"path": ledger.path, "marker": str(marker)}, max_retries=0), {"type": "manual"})
    api = people.client(people.owner)
    run_id = api.post(f"/api/jobs/{job.pk}/run/", {}, format="json").json()["id"]

    queued = api.post(f"/api/runs/{run_id}/rerun/")  # no worker yet: still queued
    assert queued.status_code == 409
    assert queued.json() == {"detail": f"Run #{run_id} is queued: only a finished run can be rerun."}

    processes.worker(concurrency=1)
    processes.beat()
    first = ended(run_id, RunStatus.FAILED)
    marker.unlink()  # the job is fixed; its failed run runs again as itself
    answer = api.post(f"/api/runs/{run_id}/rerun/")
    assert answer.status_code == 202
    assert (answer.json()["id"], answer.json()["attempt"]) == (run_id, 2)
    assert answer.json()["status"] in ("queued", "running", "succeeded")
    run = ended(run_id, RunStatus.SUCCEEDED)

    key = key_of(job, first.scheduled_for)
    assert keys_seen(ledger) == [(key, 1, run_id), (key, 2, run_id)]
    shown = api.get(f"/api/runs/{run_id}/").json()
    assert shown["idempotency_key"] == key
    assert run.scheduled_for == first.scheduled_for
    assert [(a["number"], a["outcome"]) for a in shown["attempts"]] == [(1, "failed"), (2, "succeeded")]
    assert (shown["error"], shown["status"]) == ("", "succeeded")
    assert JobRun.objects.filter(job=job).count() == 1
    entry = AuditEntry.objects.get(action=Action.RERUN, job=job)
    assert (entry.actor, entry.source) == (people.owner, "api")
    assert entry.detail == f"run #{run_id} rerun as attempt 2 (it had failed)"
    rerun = RunRerun.objects.get(run_id=run_id)
    assert (rerun.attempt, rerun.previous_status, rerun.by) == (2, "failed", people.owner)


@pytest.mark.timeout(120)
def test_a_running_run_is_not_rerun(processes, people, ledger):
    job = save_job(Job(name="slow", kind="callable", target="test.ledger", owner=people.owner,
                       kwargs={"path": ledger.path, "seconds": 30}), {"type": "manual"})
    processes.worker(concurrency=1)
    run = actions.run_now(actions.Actor.command_line(), job)
    ended(run.pk, RunStatus.RUNNING)

    answer = people.client(people.owner).post(f"/api/runs/{run.pk}/rerun/")

    assert answer.status_code == 409
    assert answer.json() == {"detail": f"Run #{run.pk} is running: only a finished run can be rerun."}
    assert status_of(run.pk) == ("running", 1)
    assert not AuditEntry.objects.filter(action=Action.RERUN).exists()
    lifecycle.cancel(run)


# --- refusals


@pytest.mark.django_db
def test_a_run_that_does_not_exist_or_is_another_teams_is_a_404_and_stays_as_it_was(people):
    run = finished(people.job)

    for user, path in [(people.outsider, f"/api/runs/{run.pk}/rerun/"), (people.owner, "/api/runs/987654321/rerun/"),
                       (people.owner, "/api/runs/abc/rerun/")]:
        assert people.client(user).post(path).status_code == 404
    assert browser(people.outsider).post(f"/runs/{run.pk}/rerun/").status_code == 404

    assert status_of(run.pk) == ("failed", 1)
    assert not AuditEntry.objects.filter(action=Action.RERUN).exists()
    assert people.client(people.teammate).post(f"/api/runs/{run.pk}/rerun/").status_code == 202  # the team's


@pytest.mark.django_db
def test_reruns_count_against_the_runs_started_per_hour_and_past_it_are_a_429_naming_the_quota(people, settings):
    settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER = 2
    runs = [finished(people.job, at=timezone.now() - timedelta(minutes=n)) for n in range(3)]
    api = people.client(people.owner)

    assert [api.post(f"/api/runs/{run.pk}/rerun/").status_code for run in runs[:2]] == [202, 202]
    refused = api.post(f"/api/runs/{runs[2].pk}/rerun/")
    run_now = api.post(f"/api/jobs/{people.job.pk}/run/", {}, format="json")

    assert refused.status_code == 429 and run_now.status_code == 429
    assert QUOTA in refused.json()["detail"] and "at most 2 per hour" in refused.json()["detail"]
    assert status_of(runs[2].pk) == ("failed", 1)
    page = browser(people.owner).post(f"/runs/{runs[2].pk}/rerun/")
    assert page.status_code == 429 and QUOTA in page.content.decode()
    # Staff have no quota.
    assert people.client(people.staff).post(f"/api/runs/{runs[2].pk}/rerun/").status_code == 202


@pytest.mark.django_db
def test_a_bulk_rerun_past_the_quota_is_a_429_and_reruns_nothing(people, settings):
    settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER = 2
    now = timezone.now()
    runs = [finished(people.job, at=now - timedelta(minutes=n + 1)) for n in range(3)]
    body = {"job": people.job.pk, "status": "failed", "since": (now - timedelta(hours=1)).isoformat(),
            "until": now.isoformat()}

    dry = people.client(people.owner).post("/api/runs/rerun/", {**body, "dry_run": True}, format="json")
    refused = people.client(people.owner).post("/api/runs/rerun/", body, format="json")

    assert dry.status_code == 200 and sorted(dry.json()["runs"]) == sorted(run.pk for run in runs)
    assert refused.status_code == 429 and QUOTA in refused.json()["detail"]
    assert [status_of(run.pk) for run in runs] == [("failed", 1)] * 3


@pytest.mark.django_db
def test_a_bulk_rerun_takes_the_finished_runs_of_a_job_or_tag_in_a_status_and_range(people, settings):
    now = timezone.now().replace(microsecond=0)
    old = finished(people.job, at=now - timedelta(days=3))
    wanted = [finished(people.job, at=now - timedelta(hours=n + 1)) for n in range(2)]
    succeeded = finished(people.job, RunStatus.SUCCEEDED, at=now - timedelta(hours=3))
    other = save_job(Job(name="others", kind="callable", target="builtin.noop", owner=people.outsider),
                     {"type": "manual"})
    foreign = finished(other, at=now - timedelta(hours=1, minutes=30))
    since, until = (now - timedelta(days=1)).isoformat(), now.isoformat()
    api = people.client(people.owner)

    dry = api.post("/api/runs/rerun/", {"tag": "reports", "since": since, "until": until, "dry_run": True},
                   format="json")
    assert dry.status_code == 200
    assert dry.json() == {"dry_run": True, "runs": [wanted[1].pk, wanted[0].pk], "started_meanwhile": []}
    assert all(status_of(run.pk) == ("failed", 1) for run in wanted)
    outsider = people.client(people.outsider).post(
        "/api/runs/rerun/", {"job": people.job.pk, "since": since, "until": until}, format="json")
    assert outsider.status_code == 202 and outsider.json()["runs"] == []

    done = api.post("/api/runs/rerun/", {"job": people.job.pk, "since": since, "until": until}, format="json")

    assert done.status_code == 202 and sorted(done.json()["runs"]) == sorted(run.pk for run in wanted)
    assert [status_of(run.pk) for run in wanted] == [("queued", 2)] * 2
    assert [status_of(run.pk) for run in (old, succeeded, foreign)] == [("failed", 1), ("succeeded", 1), ("failed", 1)]
    assert AuditEntry.objects.filter(action=Action.RERUN, job=people.job, actor=people.owner).count() == 2

    settings.JOBS_RERUN_MAX_RUNS = 1
    again = [finished(people.job, at=now - timedelta(minutes=n + 1)) for n in range(2)]
    bounded = api.post("/api/runs/rerun/", {"job": people.job.pk, "since": since, "until": until}, format="json")
    assert bounded.status_code == 400 and "(JOBS_RERUN_MAX_RUNS)" in json.dumps(bounded.json())
    assert [status_of(run.pk) for run in again] == [("failed", 1)] * 2


@pytest.mark.django_db
@pytest.mark.parametrize("body, field", [
    ({}, "since"),
    ({"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "job"),
    ({"job": 1, "tag": "x", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "job"),
    ({"job": 1, "status": "running", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "status"),
    ({"job": 1, "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
    ({"job": 1, "since": "yesterday'; DROP TABLE jobs_jobrun; --", "until": "2026-01-01T00:00:00Z"}, "since"),
    ({"job": "1 OR 1=1", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "job"),
    ({"tag": "x" * 10_000, "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "tag"),
])
def test_a_bulk_rerun_asked_badly_is_a_400_naming_the_field(people, body, field):
    run = finished(people.job, at=datetime(2026, 1, 1, 12, tzinfo=UTC))

    answer = people.client(people.owner).post("/api/runs/rerun/", body, format="json")

    assert answer.status_code == 400 and field in answer.json(), answer.json()
    assert status_of(run.pk) == ("failed", 1)


# --- the pages


@pytest.mark.django_db
def test_the_run_page_of_a_finished_run_has_a_rerun_button_that_queues_it_again(people):
    run = finished(people.job)
    page = browser(people.owner)

    assert 'id="rerun"' in page.get(f"/runs/{run.pk}/").content.decode()
    assert page.get(f"/runs/{run.pk}/rerun/").status_code == 405
    answer = page.post(f"/runs/{run.pk}/rerun/", follow=True)

    assert answer.redirect_chain == [(f"/runs/{run.pk}/", 302)]
    assert f"Run #{run.pk} is queued again as attempt 2." in answer.content.decode()
    assert status_of(run.pk) == ("queued", 2)
    assert 'id="rerun"' not in answer.content.decode()  # queued: no rerun, a cancel
    again = page.post(f"/runs/{run.pk}/rerun/", follow=True)
    assert f"Run #{run.pk} is queued: only a finished run can be rerun." in again.content.decode()
    assert AuditEntry.objects.get(action=Action.RERUN).source == "page"


# --- notifications


@pytest.mark.django_db
def test_notifications_see_a_rerun_as_a_new_attempt(people):
    channel_with_rule("webhook", {"url": "https://hooks.example.com/x"}, ["failed", "recovered"])
    job = save_job(Job(name="once", kind="callable", target="builtin.noop", max_retries=0), {"type": "manual"})
    run = lifecycle.create_run(job)
    actor = actions.Actor.command_line()

    events = []
    for attempt in (1, 2, 3):
        assert lifecycle.claim(run.pk, attempt, "w1@host", 1) is not None
        if attempt < 3:
            lifecycle.record_failure(run.pk, attempt, f"failed on attempt {attempt}")
        else:
            lifecycle.record_success(run.pk, attempt)
        events.append(sorted(Delivery.objects.filter(run=run).values_list("event", "status")))
        if attempt < 3:
            actions.rerun(actor, JobRun.objects.select_related("job").get(pk=run.pk))

    assert events[0] == [("failed", "pending")]
    # The rerun failed again: the same incident, its end recorded as its own attempt's (suppressed).
    assert events[1] == [("failed", "pending"), ("failed", "suppressed")]
    # The rerun after it succeeded: the run had failed, so the job recovered.
    assert events[2] == [("failed", "pending"), ("failed", "suppressed"), ("recovered", "pending")]
