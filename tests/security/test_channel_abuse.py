"""Channels cannot be silenced or flooded by users who do not own them.

A user's rule on a shared channel carries text the user controls (their job's error). When the
channel's server refuses it for good (a real local SMTP server answering 554, as a spam filter
does), the user's rule is paused and its owner told; the channel stays on for everyone else. Test
sends are audited and at most NOTIFY_TEST_SENDS_PER_MINUTE a minute per user (429)."""

import email
import email.policy
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEntry
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus
from notifications.models import Channel, Delivery, DeliveryStatus, Rule
from notifications.outbox import record_event

from ..test_notifications_support import (
    RecordingHTTPServer,
    RecordingSMTPServer,
    grant_channel_permissions,
    make_run,
    send_pending,
)

SPAM = "BUY CHEAP WATCHES NOW"
REFUSAL = "554 5.7.1 Message rejected as spam"


class SpamFilteringSMTPServer(RecordingSMTPServer):
    """Refuses for good (554) any message that holds SPAM; takes the others."""

    async def handle_DATA(self, server, session, envelope):
        if SPAM.encode() in envelope.content:
            return REFUSAL
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append({"to": envelope.rcpt_tos, "subject": message["Subject"],
                              "text": message.get_body(("plain",)).get_content()})
        return "250 Message accepted"


@pytest.fixture
def smtp_server():
    with SpamFilteringSMTPServer() as server:
        yield server


@pytest.fixture
def ops_mail(people):
    """The staff's shared channel (as every channel made before teams is), with staff's rule for all jobs."""
    channel = Channel.objects.create(name="ops-mail", kind="email", config={"recipients": ["ops@example.com"]},
                                     shared=True)
    Rule.objects.create(channel=channel, events=["failed"])
    return channel


def failed_run(job, error):
    run = make_run(job, status=RunStatus.FAILED, error=error)
    record_event(run, "failed")
    return run


def test_a_users_refused_content_pauses_their_rule_and_the_channel_stays_on(people, smtp_server, ops_mail,
                                                                             owned_job):
    people.outsider.email = "outsider@example.com"
    people.outsider.save()
    job = save_job(Job(name="outsiders-job", kind="callable", target="builtin.noop", owner=people.outsider),
                   {"type": "manual"})
    created = people.api(people.outsider).post("/api/rules/", {"channel": ops_mail.pk, "events": ["failed"],
                                                               "scope": "job", "job": job.pk}, format="json")
    assert created.status_code == 201, created.json()

    failed_run(job, f"ValueError: {SPAM}")
    assert send_pending() == [DeliveryStatus.FAILED]

    ops_mail.refresh_from_db()
    assert (ops_mail.enabled, ops_mail.disabled_reason) == (True, "")
    rule = Rule.objects.get(pk=created.json()["id"])
    assert rule.enabled is False
    assert "SMTP 554: 5.7.1 Message rejected as spam" in rule.paused_reason
    shown = people.api(people.outsider).get(f"/api/rules/{rule.pk}/").json()
    assert (shown["enabled"], shown["paused_reason"]) == (False, rule.paused_reason)
    entry = AuditEntry.objects.get(subject="rule", action="pause")
    assert (entry.source, entry.actor_name, entry.changes) == ("system", "the service", {"enabled": [True, False]})
    [notice] = smtp_server.messages
    assert notice["to"] == ["outsider@example.com"]
    assert notice["subject"] == "Your notification rule to ops-mail was paused"
    assert "SMTP 554" in notice["text"] and SPAM not in notice["text"]

    # The channel still tells everyone else: the staff's rule sends the owner's failure.
    failed_run(owned_job, "ValueError: the disk is full")
    assert send_pending() == [DeliveryStatus.SENT]
    assert [message["to"] for message in smtp_server.messages] == [["outsider@example.com"], ["ops@example.com"]]
    assert "owners-job" in smtp_server.messages[1]["subject"]

    # Enabled again by its owner, the rule loses the reason.
    again = people.api(people.outsider).patch(f"/api/rules/{rule.pk}/", {"enabled": True}, format="json")
    assert (again.status_code, again.json()["paused_reason"]) == (200, "")


def test_the_channel_owners_own_content_still_disables_the_channel(people, smtp_server, ops_mail, owned_job):
    """The control: what staff's rule sent is the channel's own business, as before."""
    failed_run(owned_job, f"ValueError: {SPAM}")
    assert send_pending() == [DeliveryStatus.FAILED]
    ops_mail.refresh_from_db()
    assert ops_mail.enabled is False
    assert ops_mail.disabled_reason == "SMTP 554: 5.7.1 Message rejected as spam"
    assert Rule.objects.get().enabled is True
    assert Delivery.objects.get().last_error == "SMTP 554: 5.7.1 Message rejected as spam"


def test_a_digest_refused_for_a_users_folded_content_pauses_their_rule(people, smtp_server, ops_mail, owned_job,
                                                                       settings):
    """Flooding the channel folds the user's failures into the minute's digest, which quotes their
    job's name: its refusal is theirs too."""
    settings.NOTIFY_DIGEST_THRESHOLD = 1
    job = save_job(Job(name=f"outsiders {SPAM}", kind="callable", target="builtin.noop", owner=people.outsider),
                   {"type": "manual"})
    rule = Rule.objects.create(channel=ops_mail, events=["failed"], scope="job", job=job, owner=people.outsider)
    failed_run(owned_job, "ValueError: the disk is full")  # the minute's one message on its own
    failed_run(job, "ValueError: boom")  # folded into the digest
    assert Delivery.objects.get(event="digest").folded.get().rule == rule

    assert send_pending(timezone.now() + timedelta(minutes=2)) == [DeliveryStatus.SENT, DeliveryStatus.FAILED]
    ops_mail.refresh_from_db()
    rule.refresh_from_db()
    assert (ops_mail.enabled, rule.enabled) == (True, False)
    assert "SMTP 554" in rule.paused_reason


@pytest.fixture
def http_server():
    with RecordingHTTPServer() as server:
        yield server


def test_test_sends_are_audited_and_rate_limited_per_user(people, http_server, local_http_allowed, settings,
                                                          client):
    settings.NOTIFY_TEST_SENDS_PER_MINUTE = 3
    user = grant_channel_permissions(people.outsider)
    channel = Channel.objects.create(name="mine", kind="webhook", config={"url": f"{http_server.url}/in"},
                                     owner=user)
    api = people.api(user)
    answers = [api.post(f"/api/channels/{channel.pk}/test/") for _ in range(4)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    assert answers[3].json() == {"detail": "At most 3 test sends a minute (NOTIFY_TEST_SENDS_PER_MINUTE): try again "
                                           "in a minute."}
    assert len(http_server.requests) == 3
    entries = AuditEntry.objects.filter(action="test_send").order_by("id")
    assert [(e.subject, e.job_name, e.actor, e.source) for e in entries] == [("channel", "mine", user, "api")] * 3

    client.force_login(user)  # the page says so, and sends nothing
    page = client.post(f"/channels/{channel.pk}/test/", follow=True).content.decode()
    assert "At most 3 test sends a minute (NOTIFY_TEST_SENDS_PER_MINUTE)" in page
    assert len(http_server.requests) == 3

    # Another user has their own allowance; a minute on, this one has theirs again.
    assert api.post(f"/api/channels/{channel.pk}/test/").status_code == 429
    AuditEntry.objects.filter(action="test_send").update(created_at=timezone.now() - timedelta(seconds=61))
    assert api.post(f"/api/channels/{channel.pk}/test/").status_code == 200
    staff = people.api(grant_channel_permissions(people.staff))
    assert staff.post(f"/api/channels/{channel.pk}/test/").status_code == 200
    assert len(http_server.requests) == 5
    assert AuditEntry.objects.filter(action="test_send", actor=people.staff).count() == 1
