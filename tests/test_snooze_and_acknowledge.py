"""Alerts people can live with: a job snoozed until a time sends nothing until then (what it would
send is recorded on the run, saying why), and a job's open incident is acknowledged once, from the
API, the pages, jobsctl or the signed link its alert carries, which the channels told of it hear
(PagerDuty's incident is acknowledged). Only who may act on the job may; another team's job is a
404. Real workers send what a real failure and a real recovery make."""

import json
import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from audit.models import Action, AuditEntry
from jobs.models import Job, RunStatus
from notifications.models import Delivery, DeliveryStatus, Incident
from notifications.outbox import record_event

from .api_personas import browser, make_personas
from .conftest import wait_for
from .paging_apis import OPSGENIE_KEY, PAGERDUTY_KEY
from .test_notifications_paging import job_key, opsgenie, pagerduty, run_to_its_end  # noqa: F401 (fixtures)
from .test_notifications_support import RecordingHTTPServer, channel_with_rule, make_job, make_run, send_pending

LINK = re.compile(r"http://127\.0\.0\.1:8000(/acknowledge/[^/\s\"]+/)")


def fail(job):
    run = make_run(job, status=RunStatus.FAILED, finished_at=timezone.now(), error="boom")
    record_event(run, "failed")
    return run


def succeed(job):
    run = make_run(job, status=RunStatus.SUCCEEDED, finished_at=timezone.now())
    record_event(run, "succeeded")
    return run


def in_days(days):
    return (timezone.now() + timedelta(days=days)).isoformat()


# --- snooze


@pytest.mark.django_db
def test_the_api_snoozes_and_unsnoozes_a_job_with_its_audit_entries():
    people = make_personas()
    owner = people.client(people.owner)
    until = timezone.now() + timedelta(hours=2)

    response = owner.post(f"/api/jobs/{people.job.pk}/snooze/", {"until": until.isoformat()}, format="json")

    assert response.status_code == 200, response.json()
    assert datetime.fromisoformat(response.json()["snoozed_until"]) == until
    assert people.client(people.teammate).post(f"/api/jobs/{people.job.pk}/unsnooze/").json()["snoozed_until"] is None
    entries = AuditEntry.objects.filter(job=people.job, action__in=[Action.SNOOZE, Action.UNSNOOZE]).order_by("id")
    assert [(e.action, e.actor.username) for e in entries] == [(Action.SNOOZE, "owner"), (Action.UNSNOOZE, "teammate")]
    assert entries[0].changes == {"snoozed_until": [None, until.isoformat()]}


@pytest.mark.django_db
@pytest.mark.parametrize("body, says", [
    ({"until": "2020-01-01T00:00:00Z"}, "Must be in the future"),
    ({"until": "now"}, "Datetime has wrong format"),
    ({"until": "+99999-01-01T00:00:00Z"}, "Datetime has wrong format"),
    ({}, "This field is required."),
    ({"until": "x" * 100_000}, "Datetime has wrong format"),
    ({"until": "2026-12-01T00:00:00Z'; DROP TABLE jobs_job; --"}, "Datetime has wrong format"),
])
def test_bad_times_are_a_400_naming_until(body, says):
    people = make_personas()
    response = people.client(people.owner).post(f"/api/jobs/{people.job.pk}/snooze/", body, format="json")
    assert response.status_code == 400
    assert says in " ".join(response.json()["until"])
    people.job.refresh_from_db()
    assert people.job.snoozed_until is None and not AuditEntry.objects.filter(action=Action.SNOOZE).exists()


@pytest.mark.django_db
def test_a_snooze_past_ninety_days_is_refused_and_another_teams_job_is_not_found():
    people = make_personas()
    too_far = people.client(people.owner).post(f"/api/jobs/{people.job.pk}/snooze/", {"until": in_days(91)},
                                               format="json")
    assert too_far.status_code == 400 and too_far.json()["until"][0].startswith("At most 90 days ahead")
    outsider = people.client(people.outsider)
    assert outsider.post(f"/api/jobs/{people.job.pk}/snooze/", {"until": in_days(1)}, format="json").status_code == 404
    assert outsider.post(f"/api/jobs/{people.job.pk}/unsnooze/").status_code == 404
    people.job.refresh_from_db()
    assert people.job.snoozed_until is None


@pytest.mark.django_db
def test_an_edit_or_a_clone_from_a_copy_read_before_the_snooze_does_not_undo_it():
    from jobs.actions import jobs as job_actions

    people = make_personas()
    read_before = Job.objects.get(pk=people.job.pk)
    owner = job_actions.Actor.command_line(people.owner)
    until = timezone.now() + timedelta(days=2)
    job_actions.snooze(owner, people.job, until)

    job_actions.edit(owner, read_before, {"description": "changed meanwhile"})
    clone = job_actions.clone(owner, people.job)

    assert Job.objects.get(pk=people.job.pk).snoozed_until == until
    assert Job.objects.get(pk=clone.pk).snoozed_until is None


@pytest.mark.django_db
def test_a_snoozed_job_sends_nothing_and_says_why_on_the_run(local_http_allowed, caplog):
    with RecordingHTTPServer() as hook:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["failed", "recovered"])
        people = make_personas()
        job = people.job
        people.client(people.owner).post(f"/api/jobs/{job.pk}/snooze/", {"until": in_days(1)}, format="json")

        with caplog.at_level("INFO", logger="notifications.outbox"):
            run = fail(job)
        assert send_pending() == []
        assert f"job {job.pk} is snoozed until " in caplog.text and "failed not sent to webhook" in caplog.text
        delivery = Delivery.objects.get(run=run)
        assert delivery.status == DeliveryStatus.SUPPRESSED
        assert delivery.last_error.startswith("Not sent: the job's notifications are snoozed until ")
        page = browser(people.owner).get(f"/runs/{run.pk}/").content.decode()
        assert "Not sent: the job&#x27;s notifications are snoozed until" in page

        people.client(people.owner).post(f"/api/jobs/{job.pk}/unsnooze/")
        succeed(job)
        assert send_pending() == [DeliveryStatus.SENT]
    assert [body["event"] for body in hook.json_bodies()] == ["recovered"]


@pytest.mark.django_db
def test_the_job_page_snoozes_and_unsnoozes_for_who_may_act():
    people = make_personas()
    owner = browser(people.owner)
    assert 'id="snooze"' in owner.get(f"/jobs/{people.job.pk}/").content.decode()

    response = owner.post(f"/jobs/{people.job.pk}/snooze/", {"for": "86400"}, follow=True)

    people.job.refresh_from_db()
    assert timezone.now() + timedelta(hours=23) < people.job.snoozed_until < timezone.now() + timedelta(hours=25)
    page = response.content.decode()
    assert "nightly-report is snoozed for 1 day" in page and 'id="unsnooze"' in page
    bad = owner.post(f"/jobs/{people.job.pk}/snooze/", {"for": "999999999"}, follow=True).content.decode()
    assert "Snooze for one of: 1 hour" in bad
    assert browser(people.outsider).post(f"/jobs/{people.job.pk}/unsnooze/").status_code == 404
    assert browser(people.outsider).post(f"/jobs/{people.job.pk}/snooze/", {"for": "3600"}).status_code == 404
    owner.post(f"/jobs/{people.job.pk}/unsnooze/")
    people.job.refresh_from_db()
    assert people.job.snoozed_until is None
    assert browser(people.owner).get(f"/jobs/{people.job.pk}/snooze/").status_code == 405


# --- acknowledge


@pytest.mark.django_db
def test_acknowledging_tells_the_channels_of_the_incident_and_pagerduty_acknowledges(
        pagerduty, opsgenie):  # noqa: F811
    with RecordingHTTPServer() as hook:
        channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, ["failed", "recovered"])
        channel_with_rule("opsgenie", {"api_key": OPSGENIE_KEY}, ["failed", "recovered"], name="opsgenie")
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["failed", "recovered"], name="hook")
        channel_with_rule("webhook", {"url": f"{hook.url}/other"}, ["succeeded"], name="not-told")
        people = make_personas()
        job = people.job
        run = fail(job)
        send_pending()
        assert pagerduty.status(job_key(job)) == "triggered"

        response = people.client(people.teammate).post(f"/api/jobs/{job.pk}/acknowledge/")

        assert response.status_code == 200, response.json()
        assert (response.json()["run"], response.json()["acknowledged_by_name"]) == (run.pk, "teammate")
        assert send_pending() == [DeliveryStatus.SENT] * 3
        assert (pagerduty.status(job_key(job)), opsgenie.status(job_key(job))) == ("acknowledged", "acknowledged")
        assert opsgenie.accepted(job_key(job))[-1]["note"] == "nightly-report: its incident was acknowledged by teammate"
        acknowledged = [body for body in hook.json_bodies() if body["event"] == "acknowledged"]
        assert [(b["acknowledged"]["by"], b["run"]["id"]) for b in acknowledged] == [("teammate", run.pk)]
        assert [r["path"] for r in hook.requests] == ["/hook", "/hook"]
        entry = AuditEntry.objects.get(action=Action.ACKNOWLEDGE)
        assert (entry.job_id, entry.actor.username, entry.run_id) == (job.pk, "teammate", run.pk)

        again = people.client(people.owner).post(f"/api/jobs/{job.pk}/acknowledge/")
        assert again.status_code == 409 and "acknowledged already, by teammate" in again.json()["detail"]
        fail(job)  # still the same incident: suppressed, nothing new
        succeed(job)
        send_pending()
    assert (pagerduty.status(job_key(job)), opsgenie.status(job_key(job))) == ("resolved", "closed")
    assert Incident.objects.get().closed_at is not None
    closed = people.client(people.owner).post(f"/api/jobs/{job.pk}/acknowledge/")
    assert closed.status_code == 409 and closed.json()["detail"] == "nightly-report has no open incident to acknowledge."


@pytest.mark.django_db
def test_only_who_may_act_on_the_job_acknowledges():
    people = make_personas()
    fail(people.job)
    assert people.client(people.outsider).post(f"/api/jobs/{people.job.pk}/acknowledge/").status_code == 404
    assert browser(people.outsider).post(f"/jobs/{people.job.pk}/acknowledge/").status_code == 404
    command = make_job("shell-job", kind="command", target="true", owner=people.owner, group=people.team)
    fail(command)
    refused = people.client(people.owner).post(f"/api/jobs/{command.pk}/acknowledge/")
    assert refused.status_code == 403
    assert people.client(people.runner).post(f"/api/jobs/{command.pk}/acknowledge/").status_code == 200
    assert people.client(people.owner).post("/api/jobs/999999/acknowledge/").status_code == 404
    assert AuditEntry.objects.filter(action=Action.ACKNOWLEDGE).count() == 1


@pytest.mark.django_db
def test_the_alerts_link_acknowledges_after_a_login_and_only_its_incident(local_http_allowed):
    with RecordingHTTPServer() as hook:
        channel_with_rule("webhook", {"url": f"{hook.url}/hook"}, ["failed"])
        people = make_personas()
        fail(people.job)
        send_pending()
    [body] = hook.json_bodies()
    path = LINK.match(body["acknowledge_url"])[1]

    from django.test import Client
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert browser(people.outsider).get(path).status_code == 404
    assert browser(people.outsider).post(path).status_code == 404
    forged = path.replace("/acknowledge/", "/acknowledge/9").rsplit(":", 1)[0] + ":forged/"
    assert browser(people.owner).get(forged).status_code == 404
    owner = browser(people.owner)
    asked = owner.get(path).content.decode()
    assert 'id="acknowledge"' in asked and Incident.objects.get().acknowledged_at is None

    done = owner.post(path, follow=True).content.decode()

    assert "You acknowledged nightly-report" in done and "acknowledged by owner" in done
    assert "Acknowledged by owner" in owner.get(path).content.decode()
    # An old link names its incident only: once it is over, it acknowledges no new one.
    succeed(people.job)
    fail(people.job)
    stale = owner.post(path, follow=True).content.decode()
    assert "the link&#x27;s incident is over" in stale
    assert Incident.objects.filter(acknowledged_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_the_job_page_shows_the_incident_and_acknowledges_it():
    people = make_personas()
    assert 'id="incident"' not in browser(people.owner).get(f"/jobs/{people.job.pk}/").content.decode()
    fail(people.job)
    page = browser(people.owner).get(f"/jobs/{people.job.pk}/").content.decode()
    assert "Open incident" in page and 'id="acknowledge"' in page

    after = browser(people.owner).post(f"/jobs/{people.job.pk}/acknowledge/", follow=True).content.decode()

    assert "acknowledged by owner" in after and 'id="acknowledge"' not in after
    again = browser(people.owner).post(f"/jobs/{people.job.pk}/acknowledge/", follow=True).content.decode()
    assert "acknowledged already, by owner" in again


# --- jobsctl, and real workers


@pytest.mark.timeout(300)
def test_jobsctl_snoozes_unsnoozes_and_acknowledges(jobsctl, redis_client):
    from jobs.access import tokens as api_tokens

    people = make_personas()
    token = api_tokens.create(people.owner)[1]

    snoozed = jobsctl("snooze", "nightly-report", "--until", "2h", "--json", token=token)
    assert snoozed.returncode == 0, snoozed.stderr
    assert "snoozed_until" in jobsctl("show", "nightly-report", token=token).stdout
    people.job.refresh_from_db()
    assert timezone.now() + timedelta(minutes=110) < people.job.snoozed_until < timezone.now() + timedelta(hours=2)
    refused = jobsctl("snooze", "nightly-report", "--until", "2020-01-01T00:00Z", token=token)
    assert refused.returncode != 0 and "Must be in the future" in refused.stderr
    assert jobsctl("snooze", "nightly-report", "--until", "soon", token=token).returncode != 0
    assert jobsctl("unsnooze", "nightly-report", token=token).stdout.strip() == "nightly-report is no longer snoozed."

    nothing = jobsctl("ack", "nightly-report", token=token)
    assert nothing.returncode != 0 and "has no open incident" in nothing.stderr
    fail(people.job)
    acked = jobsctl("ack", "nightly-report", token=token)
    assert acked.returncode == 0 and acked.stdout.startswith("Acknowledged nightly-report's incident"), acked.stderr
    assert json.loads(jobsctl("show", "nightly-report", "--json", token=token).stdout)["job"]["snoozed_until"] is None


@pytest.mark.timeout(200)
def test_real_workers_page_hold_a_snoozed_job_and_close_the_incident_they_ended(
        processes, tmp_path, pagerduty, local_http_allowed):  # noqa: F811
    marker = tmp_path / "broken"
    marker.touch()
    people = make_personas()
    job = make_job("fails-until-fixed", target="test.fail_while", kwargs={"marker": str(marker)},
                   owner=people.owner, group=people.team)
    channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, ["failed"])  # no rule takes recoveries
    processes.worker()

    assert run_to_its_end(job) == RunStatus.FAILED
    wait_for(lambda: pagerduty.status(job_key(job)) == "triggered", timeout=40, message="the page")
    [trigger] = pagerduty.accepted(job_key(job))
    assert [link["text"] for link in trigger["links"]] == ["The run", "Acknowledge in the job scheduler"]
    assert people.client(people.owner).post(f"/api/jobs/{job.pk}/acknowledge/").status_code == 200
    wait_for(lambda: pagerduty.status(job_key(job)) == "acknowledged", timeout=40,
             message="the worker to acknowledge the PagerDuty incident")

    marker.unlink()
    assert run_to_its_end(job) == RunStatus.SUCCEEDED
    # The worker's one-statement success still tells the outbox, which closes the incident.
    assert Incident.objects.get(job=job).closed_at is not None

    people.client(people.owner).post(f"/api/jobs/{job.pk}/snooze/", {"until": in_days(1)}, format="json")
    marker.touch()
    assert run_to_its_end(job) == RunStatus.FAILED
    delivery = Delivery.objects.filter(job=job, event="failed").latest("id")
    assert delivery.status == DeliveryStatus.SUPPRESSED and "snoozed until" in delivery.last_error
    assert len(pagerduty.accepted(job_key(job))) == 2  # the trigger and the acknowledge; nothing since
