"""The runs half of the REST API: history and its filters, one run, cancel, permissions, the schema,
and one run now that a real worker carries out."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobAttempt, JobRun, RunStatus

from .api_personas import make_personas
from .conftest import wait_for

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def add_run(job, minutes, status=RunStatus.SUCCEEDED, **fields):
    moment = T0 + timedelta(minutes=minutes)
    return JobRun.objects.create(job=job, status=status, scheduled_for=moment, created_at=moment, **fields)


def ids(response):
    assert response.status_code == 200, response.json()
    return [run["id"] for run in response.json()["results"]]


def test_it_lists_runs_newest_first_a_page_at_a_time(people):
    old, middle, new = (add_run(people.job, m) for m in (0, 10, 20))
    client = people.client(people.owner)
    assert ids(client.get("/api/runs/")) == [new.pk, middle.pk, old.pk]
    first = client.get("/api/runs/?page_size=2").json()
    assert first["count"] == 3 and [r["id"] for r in first["results"]] == [new.pk, middle.pk]
    assert ids(client.get(first["next"])) == [old.pk]
    assert "output" not in first["results"][0]
    assert first["results"][0]["job_name"] == "nightly-report"


def test_the_run_list_leaves_out_outputs_and_results_the_run_itself_carries(people):
    """20 runs, each with 60 KB of output and a 60 KB result: 2.4 MB the list does not carry."""
    big_output, big_result = "o" * 60_000, {"rows": "r" * 60_000}
    runs = [add_run(people.job, m, output=big_output, output_bytes=60_000, result=big_result, error="boom")
            for m in range(20)]
    client = people.client(people.owner)

    listed = client.get("/api/runs/?page_size=500")

    assert listed.status_code == 200 and len(listed.json()["results"]) == 20
    assert all("output" not in run and "result" not in run for run in listed.json()["results"])
    assert [(run["output_bytes"], run["error"]) for run in listed.json()["results"]] == [(60_000, "boom")] * 20
    assert len(listed.content) < 20 * 2_000
    one = client.get(f"/api/runs/{runs[0].pk}/").json()
    assert (one["output"], one["result"]) == (big_output, big_result)


def test_it_filters_runs_by_job_status_and_time(people):
    other = save_job(Job(name="other", kind="callable", target="builtin.noop", owner=people.owner))
    failed = add_run(people.job, 0, RunStatus.FAILED)
    succeeded = add_run(people.job, 10)
    elsewhere = add_run(other, 20)
    client = people.client(people.owner)
    assert ids(client.get(f"/api/runs/?job={other.pk}")) == [elsewhere.pk]
    assert ids(client.get("/api/runs/?status=failed")) == [failed.pk]
    assert ids(client.get(f"/api/runs/?job={people.job.pk}&status=succeeded")) == [succeeded.pk]
    assert ids(client.get("/api/runs/?since=2025-03-01T12:05:00Z")) == [elsewhere.pk, succeeded.pk]
    assert ids(client.get("/api/runs/?until=2025-03-01T13:15:00%2B01:00")) == [succeeded.pk, failed.pk]
    assert ids(client.get("/api/runs/?since=2025-03-01T12:05:00&until=2025-03-01T12:15:00")) == [succeeded.pk]


def test_it_filters_runs_by_tag_and_orders_them(people):
    tagged = save_job(Job(name="tagged", kind="callable", target="builtin.noop", owner=people.owner, tags=["etl"]))
    late_slot = add_run(tagged, 0)
    JobRun.objects.filter(pk=late_slot.pk).update(scheduled_for=T0 + timedelta(hours=5))
    early_slot = add_run(tagged, 10)
    add_run(people.job, 20)
    client = people.client(people.owner)
    assert ids(client.get("/api/runs/?tag=etl")) == [early_slot.pk, late_slot.pk]
    assert ids(client.get("/api/runs/?tag=etl&ordering=-scheduled_for")) == [late_slot.pk, early_slot.pk]
    assert ids(client.get("/api/runs/?tag=etl&ordering=created_at")) == [late_slot.pk, early_slot.pk]
    assert client.get("/api/runs/?ordering=worker").status_code == 400


def test_it_serves_a_documentation_page_that_needs_no_internet(people):
    assert APIClient().get("/api/docs/")["Location"] == "/accounts/login/?next=/api/docs/"  # a page: log in first
    browser = APIClient()
    browser.force_login(people.owner)  # a person's session, as in a browser
    page = browser.get("/api/docs/").content.decode()
    assert "/api/schema/" in page
    assert "swagger-ui" in page and "https://" not in page
    # every script and stylesheet from this server (a random token in the page may spell "cdn")
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", page)


@pytest.mark.parametrize("query, field", [
    ("status=exploded", "status"), ("job=first", "job"), ("since=yesterday", "since"), ("until=2025-13-01", "until"),
])
def test_it_rejects_bad_run_filters(people, query, field):
    response = people.client(people.owner).get(f"/api/runs/?{query}")
    assert response.status_code == 400 and field in response.json()


def test_it_shows_one_run_with_attempts_output_and_timings(people):
    run = add_run(people.job, 0, RunStatus.SUCCEEDED, attempt=2, max_attempts=3, worker="w1@host",
                  output="hello\n", output_bytes=6, started_at=T0, finished_at=T0 + timedelta(seconds=90),
                  result={"ok": True})
    JobAttempt.objects.create(run=run, number=1, outcome="failed", task_id="t1", worker="w0@host", pid=11,
                              started_at=T0, error="boom", traceback="Traceback ...")
    JobAttempt.objects.create(run=run, number=2, outcome="succeeded", task_id="t2", worker="w1@host", pid=12,
                              started_at=T0)
    body = people.client(people.owner).get(f"/api/runs/{run.pk}/").json()
    assert body["job"] == people.job.pk and body["job_name"] == "nightly-report"
    assert (body["output"], body["worker"], body["duration_seconds"]) == ("hello\n", "w1@host", 90.0)
    assert (body["attempt"], body["max_attempts"], body["idempotency_key"]) == (2, 3, f"{people.job.pk}:2025-03-01T12:00:00.000000Z")
    assert body["result"] == {"ok": True}
    assert [(a["number"], a["outcome"], a["pid"], a["error"]) for a in body["attempts"]] == [
        (1, "failed", 11, "boom"), (2, "succeeded", 12, "")]


def test_it_cancels_a_queued_run_once_and_answers_the_same_after(people):
    run = add_run(people.job, 0, RunStatus.QUEUED)
    client = people.client(people.teammate)
    first = client.post(f"/api/runs/{run.pk}/cancel/")
    assert first.status_code == 200
    assert first.json()["status"] == "cancelled" and first.json()["detail"] == "Cancelled."
    run.refresh_from_db()
    finished_at = run.finished_at
    assert run.status == RunStatus.CANCELLED and "teammate" in run.reason

    second = client.post(f"/api/runs/{run.pk}/cancel/")
    assert second.status_code == 200
    assert second.json()["status"] == "cancelled" and "nothing changed" in second.json()["detail"]
    run.refresh_from_db()
    assert run.finished_at == finished_at


def test_it_leaves_a_succeeded_run_alone_on_cancel(people):
    run = add_run(people.job, 0, RunStatus.SUCCEEDED)
    response = people.client(people.owner).post(f"/api/runs/{run.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "succeeded"
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_it_hides_runs_of_jobs_an_outsider_cannot_see(people):
    run = add_run(people.job, 0, RunStatus.QUEUED)
    outsider = people.client(people.outsider)
    assert ids(outsider.get("/api/runs/")) == []
    assert outsider.get(f"/api/runs/{run.pk}/").status_code == 404
    assert outsider.post(f"/api/runs/{run.pk}/cancel/").status_code == 404
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    assert ids(people.client(people.staff).get("/api/runs/")) == [run.pk]


def test_it_serves_an_openapi_schema(people):
    assert APIClient().get("/api/schema/").status_code in (401, 403)
    response = people.client(people.owner).get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/jobs/", "/api/jobs/{id}/run/", "/api/runs/", "/api/runs/{id}/cancel/"} <= set(schema["paths"])


def test_it_runs_a_job_now_on_a_real_worker(processes):
    people = make_personas()
    client = people.client(people.owner)
    processes.worker(concurrency=1)
    response = client.post(f"/api/jobs/{people.job.pk}/run/")
    assert response.status_code == 202
    url = response["Location"]

    def succeeded():
        body = client.get(url).json()
        return body if body["status"] == "succeeded" else None

    body = wait_for(succeeded, timeout=30, message="the run to succeed")
    assert body["result"] == {"args": [], "kwargs": {}}
    assert body["worker"] and body["attempts"][0]["outcome"] == "succeeded"
    assert JobRun.objects.count() == 1
