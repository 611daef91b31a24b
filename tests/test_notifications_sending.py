"""Sending deliveries to real local SMTP and HTTP servers: content, retries, timeouts, permanent
errors, signatures and digests."""

import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone

from jobs import lifecycle
from jobs.models import Job, JobRun, RunStatus
from jobs.timing import clock
from notifications.models import Channel, Delivery, DeliveryStatus
from notifications.outbox import record_event
from notifications.sending import MAX_ATTEMPTS, REQUEUE_AFTER, send_delivery, send_due

from .test_notifications_support import (
    RecordingHTTPServer,
    RecordingSMTPServer,
    channel_with_rule,
    make_job,
    make_run,
    send_pending,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("local_http_allowed")]


@pytest.fixture
def http_server():
    with RecordingHTTPServer() as server:
        yield server


@pytest.fixture
def smtp_server():
    with RecordingSMTPServer() as server:
        yield server


def slack_delivery(server, job=None, event="failed", **run_fields):
    channel = channel_with_rule("slack", {"url": f"{server.url}/hook"}, [event])
    run = make_run(job or make_job(), status=RunStatus.FAILED, error="ValueError: boom", **run_fields)
    record_event(run, event)
    return Delivery.objects.get(channel=channel, run=run)


def test_it_sends_one_email_and_one_slack_post_for_a_final_failure(smtp_server, http_server, settings):
    settings.SITE_URL = "https://scheduler.example.com"
    job = make_job()
    channel_with_rule("email", {"recipients": ["ops@example.com"]}, ["failed", "timed_out"])
    channel_with_rule("slack", {"url": f"{http_server.url}/hook"}, ["failed"])
    run = make_run(job)

    assert lifecycle.record_failure(run.pk, 1, "ValueError: the report is empty") == RunStatus.FAILED
    record_event(JobRun.objects.get(pk=run.pk), "failed")  # a duplicate event changes nothing
    assert send_pending() == [DeliveryStatus.SENT, DeliveryStatus.SENT]
    assert send_pending() == []

    run_url = f"https://scheduler.example.com/runs/{run.pk}/"
    [mail] = smtp_server.messages
    assert mail["to"] == ["ops@example.com"]
    assert mail["subject"] == "[scheduler] nightly-report failed after 1 attempt(s)"
    assert "ValueError: the report is empty" in mail["text"]
    assert run_url in mail["text"]
    assert run_url in mail["html"]
    [post] = http_server.json_bodies()
    assert http_server.requests[0]["path"] == "/hook"
    text = post["text"]
    assert "*nightly-report failed after 1 attempt(s)*" in text
    assert "Status: failed · Attempt 1 of 1 · Duration:" in text
    assert "ValueError: the report is empty" in text
    assert f"<{run_url}|Open run #{run.pk}>" in text
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}


def test_it_retries_a_slack_post_that_answers_500_until_it_gets_through(http_server):
    http_server.script = [500, 500, 200]
    delivery = slack_delivery(http_server)

    assert send_delivery(delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert "answered HTTP 500" in delivery.last_error
    assert send_delivery(delivery.pk) is None  # not due yet: backoff
    assert send_delivery(delivery.pk, now=delivery.next_attempt_at) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert send_delivery(delivery.pk, now=delivery.next_attempt_at) == DeliveryStatus.SENT

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("sent", 3, "")
    assert len(http_server.requests) == 3
    assert http_server.json_bodies()[0] == http_server.json_bodies()[2]


def test_it_gives_up_after_the_last_attempt_and_shows_the_error(http_server):
    http_server.script = [503] * MAX_ATTEMPTS
    delivery = slack_delivery(http_server)

    for _ in range(MAX_ATTEMPTS):
        delivery.refresh_from_db()
        send_delivery(delivery.pk, now=delivery.next_attempt_at)

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.GIVEN_UP
    assert delivery.attempts == MAX_ATTEMPTS
    assert "answered HTTP 503" in delivery.last_error
    assert len(http_server.requests) == MAX_ATTEMPTS


@override_settings(NOTIFY_HTTP_TIMEOUT_SECONDS=0.5)
def test_it_times_out_a_hanging_endpoint_and_retries_it(http_server):
    http_server.script = ["hang", 200]
    delivery = slack_delivery(http_server)
    assert delivery.run.status == RunStatus.FAILED  # the run was over before any sending began

    assert send_delivery(delivery.pk) == DeliveryStatus.PENDING
    delivery.refresh_from_db()
    assert "within 0.5 s" in delivery.last_error
    assert send_delivery(delivery.pk, now=delivery.next_attempt_at) == DeliveryStatus.SENT
    assert len(http_server.requests) == 2


def test_it_fails_a_404_at_once_and_disables_the_channel(http_server):
    http_server.script = [404]
    delivery = slack_delivery(http_server)

    assert send_delivery(delivery.pk) == DeliveryStatus.FAILED
    delivery.refresh_from_db()
    channel = Channel.objects.get()
    assert delivery.attempts == 1
    assert "answered HTTP 404: no_service" in delivery.last_error
    assert not channel.enabled
    assert "HTTP 404" in channel.last_error
    assert "HTTP 404" in channel.disabled_reason
    assert len(http_server.requests) == 1


def test_it_signs_webhook_bodies_with_hmac_sha256(http_server, settings):
    channel = channel_with_rule("webhook", {"url": f"{http_server.url}/in", "secret": "s3cret"}, ["timed_out"])
    run = make_run(make_job(), status=RunStatus.RUNNING, max_attempts=1)
    lifecycle.record_failure(run.pk, 1, "Timed out after 60 s", timed_out=True)

    assert send_pending() == [DeliveryStatus.SENT]
    [request] = http_server.requests
    expected = "sha256=" + hmac.new(b"s3cret", request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Signature"] == expected
    [body] = http_server.json_bodies()
    assert body["event"] == "timed_out"
    assert body["job"] == {"id": run.job_id, "name": "nightly-report"}
    assert set(body["run"]) == {"id", "status", "attempt", "scheduled_for", "started_at", "finished_at", "error",
                                "url"}
    assert body["run"]["url"] == f"{settings.SITE_URL}/runs/{run.pk}/"  # the run's page, not the admin's
    assert (body["run"]["id"], body["run"]["status"], body["run"]["error"]) == (run.pk, "timed_out",
                                                                               "Timed out after 60 s")
    assert "sent_at" in body
    assert Delivery.objects.get(channel=channel).status == "sent"


def test_it_folds_a_flood_of_failures_into_one_digest(http_server, settings):
    settings.NOTIFY_DIGEST_THRESHOLD = 20
    channel_with_rule("slack", {"url": f"{http_server.url}/hook"}, ["failed"])
    jobs = Job.objects.bulk_create([Job(name=f"job-{i:03}", kind="callable", target="builtin.noop")
                                    for i in range(200)])
    # Deliveries are timed by the database's clock: here it follows the travelling one.
    with time_machine.travel(datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC)), \
            mock.patch("notifications.outbox.clock.now", timezone.now):
        for job in jobs:
            record_event(make_run(job, status=RunStatus.FAILED, error="boom"), "failed")
        counts = {s: Delivery.objects.filter(status=s).count() for s in ("pending", "folded")}
        digest = Delivery.objects.get(event="digest")

    assert counts == {"pending": 20 + 1, "folded": 180}
    assert digest.folded.count() == 180
    assert send_delivery(digest.pk, now=digest.next_attempt_at - timedelta(seconds=1)) is None
    assert send_delivery(digest.pk, now=digest.next_attempt_at) == DeliveryStatus.SENT
    [post] = http_server.json_bodies()
    assert post["text"].startswith("*180 more notifications in the minute from 2026-03-01T12:00:00")
    assert "job-020 failed after 1 attempt(s)" in post["text"]
    assert "…and 130 more." in post["text"]


def test_it_sends_a_test_notification_from_the_admin(http_server, admin_client):
    good = Channel.objects.create(name="team slack", kind="slack", config={"url": f"{http_server.url}/ok"})
    bad = Channel.objects.create(name="old hook", kind="webhook", config={"url": "http://127.0.0.1:9/gone"})

    response = admin_client.post("/admin/notifications/channel/", {
        "action": "send_test", "_selected_action": [good.pk, bad.pk]}, follow=True)

    text = response.content.decode()
    assert "Sent a test notification to team slack." in text
    assert "Could not send a test notification to old hook: could not reach http://127.0.0.1:9/gone" in text
    [post] = http_server.json_bodies()
    assert "Test notification from the job scheduler" in post["text"]
    bad.refresh_from_db()
    assert "could not reach" in bad.last_error


def test_it_sends_a_test_notification_from_the_channels_page(http_server, admin_client, client, django_user_model):
    channel = Channel.objects.create(name="ops hook", kind="webhook", config={"url": f"{http_server.url}/hook"})

    page = admin_client.get("/channels/").content.decode()
    assert "ops hook" in page and "Send a test notification" in page
    response = admin_client.post(f"/channels/{channel.pk}/test/", follow=True)

    assert "Sent a test notification to ops hook." in response.content.decode()
    [body] = http_server.json_bodies()
    assert body["event"] == "test"
    client.force_login(django_user_model.objects.create_user("not-staff"))
    assert client.get("/channels/").status_code == 404
    assert client.post(f"/channels/{channel.pk}/test/").status_code == 404
    assert len(http_server.json_bodies()) == 1


def test_it_fails_an_email_to_a_refused_address_at_once(smtp_server):
    channel = channel_with_rule("email", {"recipients": ["nobody@example.com"]}, ["failed"])
    record_event(make_run(make_job(), status=RunStatus.FAILED), "failed")

    assert send_pending() == [DeliveryStatus.FAILED]
    assert smtp_server.messages == []
    channel.refresh_from_db()
    assert channel.disabled_reason == "recipients refused: nobody@example.com"
    assert Delivery.objects.get().last_error == "recipients refused: nobody@example.com"


def test_it_republishes_due_deliveries_and_takes_back_stale_claims(redis_client, http_server, settings):
    delivery = slack_delivery(http_server)
    now = delivery.next_attempt_at + timedelta(seconds=1)
    Delivery.objects.filter(pk=delivery.pk).update(queued_at=None)  # as after a failed attempt

    assert send_due(now) == 1
    assert send_due(now) == 0  # its task was just published
    assert redis_client.llen(settings.JOBS_DEFAULT_QUEUE) == 1

    Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.SENDING, next_attempt_at=now)
    assert send_due(now + REQUEUE_AFTER) == 1  # the sender died: send it again
    assert send_delivery(delivery.pk, now=now + REQUEUE_AFTER) == DeliveryStatus.SENT
    assert len(http_server.requests) == 1


@pytest.mark.postgres("the database's clock: SQLite has none, the host's is the only one")
def test_it_times_deliveries_by_the_databases_clock_not_the_hosts(http_server):
    # A worker two minutes ahead records the failure; one two minutes behind sends it.
    with time_machine.travel(timezone.now() + timedelta(minutes=2)):
        delivery = slack_delivery(http_server)
    assert abs(delivery.next_attempt_at - clock.now()) < timedelta(seconds=5)  # due now, not in 2 minutes
    http_server.script = [503]
    with time_machine.travel(timezone.now() - timedelta(minutes=2)):
        assert send_delivery(delivery.pk) == DeliveryStatus.PENDING  # sent at once, retried after a backoff
    delivery.refresh_from_db()
    assert clock.now() < delivery.next_attempt_at < clock.now() + timedelta(minutes=1)


SPOOFING_NAME = "<!channel> <https://evil|Open run>"


def test_a_slack_message_quotes_a_job_name_and_an_error_without_mentioning_or_linking(http_server, settings):
    settings.SITE_URL = "https://scheduler.example.com"
    job = make_job(name=SPOOFING_NAME)
    channel_with_rule("slack", {"url": f"{http_server.url}/hook"}, ["failed"])
    error = "boom```\n<!here> & <https://evil2|click>\n```"  # tries to close the code block, then mention
    run = make_run(job, status=RunStatus.FAILED, error=error)
    record_event(run, "failed")

    assert send_pending() == [DeliveryStatus.SENT]

    text = http_server.json_bodies()[0]["text"]
    run_link = f"<https://scheduler.example.com/runs/{run.pk}/|Open run #{run.pk}>"
    assert "*&lt;!channel&gt; &lt;https://evil|Open run&gt; failed after 1 attempt(s)*" in text
    assert "Job: &lt;!channel&gt; &lt;https://evil|Open run&gt; ·" in text
    assert "&lt;!here&gt; &amp; &lt;https://evil2|click&gt;" in text
    # Slack reads "<…>" as a mention or a link: the only ones left are the message's own links (the
    # run, and the signed link that acknowledges the job's incident).
    acknowledge_link = re.search(r"<https://scheduler\.example\.com/acknowledge/[^|<>]+/\|Acknowledge>", text)
    assert text.count("<") == 2 and text.count(">") == 2 and run_link in text and acknowledge_link
    assert text.count("```") == 2  # the block's own fences: the error cannot close it


def test_a_lost_run_notifies_with_a_link_its_owner_can_open(http_server, smtp_server, settings, redis_client,
                                                          client, django_user_model):
    settings.SITE_URL = "https://scheduler.example.com"
    settings.JOBS_MAX_LOST_ATTEMPTS = 0
    owner = django_user_model.objects.create_user("owner")  # not staff: the admin is closed to them
    job = make_job(owner=owner)
    channel_with_rule("slack", {"url": f"{http_server.url}/hook"}, ["lost"])
    channel_with_rule("email", {"recipients": ["ops@example.com"]}, ["lost"])
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, 1, "w1@host", 4321) is not None

    assert lifecycle.record_failure(run.pk, 1, "Lost: no heartbeat", lost=True) == RunStatus.LOST
    assert send_pending() == [DeliveryStatus.SENT, DeliveryStatus.SENT]

    link = f"https://scheduler.example.com/runs/{run.pk}/"
    text = http_server.json_bodies()[0]["text"]
    assert "*nightly-report was lost: its worker stopped 1 time(s) in a row*" in text
    assert f"<{link}|Open run #{run.pk}>" in text
    [mail] = smtp_server.messages
    assert link in mail["text"] and f'href="{link}"' in mail["html"]
    assert "/admin/" not in text + mail["text"] + mail["html"]
    client.force_login(owner)
    page = client.get(link.removeprefix(settings.SITE_URL))
    assert page.status_code == 200 and f"Run #{run.pk}" in page.content.decode()
