"""Maintenance windows with real processes: beat holds a cron job's slot inside a ``hold`` window
(a run skipped with the reason maintenance, said by "why" and the report) and runs the slot after
it; a worker's failed run inside a ``mute`` window sends nothing to a webhook, one outside does."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.actions import windows as actions
from jobs.actions.jobs import Actor
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus, Window
from jobs.operations.reports import job_report
from notifications.models import Delivery

from .conftest import wait_for
from .test_notifications_support import RecordingHTTPServer, channel_with_rule, make_job


def next_minute(moment):
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=1)


def ended(job, slot):
    run = job.runs.filter(scheduled_for=slot).first()
    return run if run is not None and run.is_terminal else None


@pytest.mark.timeout(240)
def test_beat_holds_the_slot_inside_a_window_and_runs_the_one_after(processes, django_user_model):
    job = save_job(Job(name="every-minute", kind="callable", target="builtin.noop"),
                   {"type": "cron", "cron": "* * * * *", "timezone": "UTC"})
    held = next_minute(datetime.now(UTC) + timedelta(seconds=5))  # beat has a few seconds to start
    actions.create(Actor.command_line(), Window(name="db-upgrade", starts_at=held - timedelta(seconds=1),
                                                ends_at=held + timedelta(seconds=1), jobs=[job.pk]))
    processes.worker()
    processes.beat()

    skipped = wait_for(lambda: ended(job, held), timeout=100, message="the slot inside the window")
    after = wait_for(lambda: ended(job, held + timedelta(minutes=1)), timeout=100, message="the slot after it")

    assert (skipped.status, skipped.reason) == (RunStatus.SKIPPED, "maintenance: window db-upgrade")
    assert after.status == RunStatus.SUCCEEDED
    assert not job.runs.filter(scheduled_for__gt=held - timedelta(minutes=1), scheduled_for__lt=held).exclude(
        status=RunStatus.SUCCEEDED).exists()
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    why = client.get(f"/api/jobs/{job.pk}/why/", {"at": held.isoformat()}).json()["explanation"]
    assert why == f"Skipped: the slot at {held:%Y-%m-%d %H:%M:%S} UTC was not run: maintenance: window db-upgrade."
    assert job_report(job, 1)["skipped_by_reason"] == {"maintenance: window db-upgrade": 1}


@pytest.mark.timeout(120)
def test_a_failed_run_inside_a_mute_window_sends_nothing_and_one_outside_does(processes, local_http_allowed):
    muted, loud = make_job("muted", target="builtin.fail"), make_job("loud", target="builtin.fail")
    now = timezone.now()
    actions.create(Actor.command_line(), Window(name="quiet", mode="mute", starts_at=now - timedelta(minutes=1),
                                                ends_at=now + timedelta(minutes=10), jobs=[muted.pk]))
    processes.worker()
    with RecordingHTTPServer() as hook:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["failed"])
        inside = lifecycle.create_run(muted)
        wait_for(lambda: ended(muted, inside.scheduled_for), timeout=40, message="the muted job's run to fail")
        outside = lifecycle.create_run(loud)
        wait_for(lambda: ended(loud, outside.scheduled_for), timeout=40, message="the other job's run to fail")
        wait_for(lambda: hook.json_bodies(), timeout=30, message="the other job's notification")

    assert ended(muted, inside.scheduled_for).status == RunStatus.FAILED
    assert [(body["event"], body["job"]["name"]) for body in hook.json_bodies()] == [("failed", "loud")]
    assert list(Delivery.objects.values_list("job__name", flat=True)) == ["loud"]
