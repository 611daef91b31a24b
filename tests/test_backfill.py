"""Backfill: the runs of every past slot of a range, from the API, the command line and the job
page; safe to repeat, bounded, and run by a real worker."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, RunTrigger

from .conftest import wait_for

DAY = datetime(2026, 11, 20, tzinfo=UTC)


def hourly(name="hourly", **fields):
    fields.setdefault("kind", "callable")
    fields.setdefault("target", "builtin.noop")
    return save_job(Job(name=name, **fields), {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})


def backfill_url(job):
    return f"/api/jobs/{job.pk}/backfill/"


def test_it_backfills_a_day_of_an_hourly_job_once_and_a_repeat_creates_none(people):
    job = hourly(owner=people.owner)
    client = people.client(people.owner)
    body = {"start": DAY.isoformat(), "end": (DAY + timedelta(days=1)).isoformat()}

    first = client.post(backfill_url(job), body, format="json")

    assert first.status_code == 202, first.json()
    assert first.json()["to_create"] == 24 and len(first.json()["created"]) == 24
    runs = JobRun.objects.filter(job=job).order_by("scheduled_for")
    assert [run.scheduled_for for run in runs] == [DAY + timedelta(hours=h) for h in range(24)]
    assert {(run.trigger, run.status, run.triggered_by_id) for run in runs} == {
        (RunTrigger.BACKFILL, RunStatus.QUEUED, people.owner.pk)}

    again = client.post(backfill_url(job), body, format="json")

    assert again.status_code == 202
    assert again.json()["to_create"] == 0 and again.json()["created"] == []
    assert JobRun.objects.filter(job=job).count() == 24


def test_an_interval_that_already_ran_off_the_current_grid_is_not_backfilled_again(people):
    job = save_job(Job(name="every-hour", kind="callable", target="builtin.noop", owner=people.owner),
                   {"type": "interval", "every_seconds": 3600})
    Job.objects.filter(pk=job.pk).update(next_run_at=DAY + timedelta(days=2))
    job.refresh_from_db()
    # Resumed or edited since: the run of 05:00-06:00 fell at 05:17, off today's grid.
    ran = JobRun.objects.create(job=job, scheduled_for=DAY + timedelta(hours=5, minutes=17),
                                status=RunStatus.SUCCEEDED)
    body = {"start": DAY.isoformat(), "end": (DAY + timedelta(days=1)).isoformat()}

    response = people.client(people.owner).post(backfill_url(job), body, format="json")

    assert response.status_code == 202, response.json()
    assert response.json()["to_create"] == 23
    assert {"scheduled_for": (DAY + timedelta(hours=5)).isoformat().replace("+00:00", "Z"), "run": ran.pk} \
        in response.json()["slots"]
    assert JobRun.objects.filter(job=job, scheduled_for__gte=DAY + timedelta(hours=5),
                                 scheduled_for__lt=DAY + timedelta(hours=6)).count() == 1


def test_a_dry_run_lists_the_slots_and_the_runs_they_already_have(people):
    job = hourly(owner=people.owner)
    existing = JobRun.objects.create(job=job, scheduled_for=DAY + timedelta(hours=2), status=RunStatus.SUCCEEDED)
    body = {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=4)).isoformat(), "dry_run": True}

    response = people.client(people.owner).post(backfill_url(job), body, format="json")

    assert response.status_code == 200
    assert response.json()["to_create"] == 3
    assert [slot["run"] for slot in response.json()["slots"]] == [None, None, existing.pk, None]
    assert JobRun.objects.filter(job=job).count() == 1


def test_a_slot_that_already_has_a_run_is_left_alone(people):
    job = hourly(owner=people.owner)
    skipped = JobRun.objects.create(job=job, scheduled_for=DAY, status=RunStatus.SKIPPED,
                                    reason="missed: catch-up policy 'none'")
    body = {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=2)).isoformat()}

    response = people.client(people.owner).post(backfill_url(job), body, format="json")

    assert len(response.json()["created"]) == 1
    skipped.refresh_from_db()
    assert (skipped.status, skipped.trigger) == (RunStatus.SKIPPED, RunTrigger.SCHEDULE)


@override_settings(JOBS_BACKFILL_MAX_SLOTS=10)
def test_it_refuses_bad_ranges_with_a_message_per_field(people):
    job = hourly(owner=people.owner)
    client = people.client(people.owner)
    future = datetime.now(UTC) + timedelta(days=1)
    cases = [
        ({"start": DAY.isoformat(), "end": (DAY + timedelta(hours=11)).isoformat()}, "end", "more than 10 slots"),
        ({"start": DAY.isoformat(), "end": DAY.isoformat()}, "end", "after start"),
        ({"start": DAY.isoformat(), "end": future.isoformat()}, "end", "future"),
        ({"start": "yesterday", "end": DAY.isoformat()}, "start", "format"),
        ({"end": DAY.isoformat()}, "start", "required"),
    ]
    for body, field, words in cases:
        response = client.post(backfill_url(job), body, format="json")
        assert response.status_code == 400, body
        assert words in " ".join(response.json()[field]), response.json()
    assert not JobRun.objects.filter(job=job).exists()


def test_a_manual_job_has_nothing_to_backfill(people):
    response = people.client(people.owner).post(
        f"/api/jobs/{save_job(Job(name='m', kind='callable', target='builtin.noop', owner=people.owner)).pk}/backfill/",
        {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=1)).isoformat()}, format="json")
    assert response.status_code == 400
    assert "manual" in response.json()["job"][0]


def test_only_who_may_act_on_the_job_can_backfill_it(people):
    body = {"start": DAY.isoformat(), "end": (DAY + timedelta(hours=1)).isoformat()}
    assert people.client(people.outsider).post(backfill_url(people.job), body, format="json").status_code == 404
    command_job = hourly("shell", kind="command", target="true", owner=people.owner)
    assert people.client(people.owner).post(backfill_url(command_job), body, format="json").status_code == 403
    assert people.client(people.teammate).post(backfill_url(people.job), body, format="json").status_code == 202
    assert not JobRun.objects.filter(job=command_job).exists()


def test_the_command_line_backfills_and_refuses_an_unbounded_range(db):
    job = hourly()
    out = StringIO()
    call_command("jobs", "backfill", "hourly", "--from", "2026-11-20T00:00", "--to", "2026-11-21T00:00",
                 "--dry-run", stdout=out)
    assert "dry run: 24 slots, 24 would be created" in out.getvalue()
    assert not JobRun.objects.filter(job=job).exists()

    call_command("jobs", "backfill", "hourly", "--from", "2026-11-20T00:00Z", "--to", "2026-11-21T00:00Z",
                 stdout=out)
    assert "backfilled: 24 runs created, 0 slots already had one." in out.getvalue()
    call_command("jobs", "backfill", "hourly", "--from", "2026-11-20", "--to", "2026-11-21", stdout=out)
    assert "backfilled: 0 runs created, 24 slots already had one." in out.getvalue()
    assert JobRun.objects.filter(job=job, trigger=RunTrigger.BACKFILL).count() == 24

    with pytest.raises(CommandError, match="--to: The range holds more than 1000 slots"):
        call_command("jobs", "backfill", "hourly", "--from", "2020-01-01", "--to", "2026-01-01", stdout=out)
    with pytest.raises(CommandError, match="--from: 'last week' is not an ISO 8601"):
        call_command("jobs", "backfill", "hourly", "--from", "last week", "--to", "2026-01-01", stdout=out)


def test_the_job_page_shows_the_slots_first_then_creates_the_runs(people):
    job = hourly(owner=people.owner)
    client = Client()
    client.force_login(people.owner)
    url = f"/jobs/{job.pk}/backfill/"
    form = {"from": "2026-11-20T00:00", "to": "2026-11-20T06:00"}

    preview = client.post(url, form)

    assert preview.status_code == 200
    assert preview.content.decode().count("will be created") == 6
    assert "Create 6 runs" in preview.content.decode()
    assert not JobRun.objects.filter(job=job).exists()

    done = client.post(url, {**form, "confirm": "1"}, follow=True)

    assert "6 runs queued" in done.content.decode()
    assert JobRun.objects.filter(job=job, trigger=RunTrigger.BACKFILL).count() == 6
    assert b"Backfill" in client.get(f"/jobs/{job.pk}/").content


def test_backfilled_runs_are_run_by_a_worker(processes):
    job = hourly(target="builtin.noop")
    processes.worker()
    call_command("jobs", "backfill", "hourly", "--from", "2026-11-20T00:00", "--to", "2026-11-20T03:00",
                 stdout=StringIO())
    wait_for(lambda: JobRun.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 3, timeout=60,
             message="the three backfilled runs to succeed")
    assert JobRun.objects.filter(job=job).count() == 3
