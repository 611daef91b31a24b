"""Send deliveries: claim one with a conditional update, have its channel's kind render and send
it (``transmit``), record the outcome. Transient errors are retried with exponential backoff up to
``MAX_ATTEMPTS``; permanent ones fail the delivery at once and disable the channel with the reason
shown on it, unless the channel's kind refused what a rule of someone else (not staff, not the
channel's owner) sent: then that rule is paused (``pause_rule``), its owner told (an audit entry,
the reason on the rule, an email), and the channel stays on for everyone else. Error texts come from ``transmit`` with the channel's secrets redacted: they are
stored, logged and shown as they are."""

import logging
import traceback
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from audit import trail
from audit.models import Action, Source, Subject
from jobs.models import JobRun
from jobs.telemetry import logs, tracing
from jobs.timing import clock

from . import channel_secrets, channels
from .channels.base import TransportError
from .models import Channel, Delivery, DeliveryStatus, Rule
from .outbox import is_foreign
from .queueing import enqueue

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 2
BACKOFF_MAX_SECONDS = 300
# A delivery left "sending" this long lost its sender (a killed worker): send it again.
SENDING_LEASE = timedelta(seconds=120)
# send_due publishes a pending delivery again only when its last task is this old.
REQUEUE_AFTER = timedelta(seconds=60)


def backoff(attempts):
    return timedelta(seconds=min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS ** attempts))


def transmit(channel, delivery):
    """Render ``delivery`` as the channel's kind says and send it with the channel's secrets opened.
    Whatever goes wrong comes out as a TransportError whose message has them redacted, since it is
    stored on the delivery and the channel, logged, and shown on the run page."""
    spec = channels.get(channel.kind)
    if spec is None:
        raise TransportError(f"unknown channel kind {channel.kind!r}", permanent=True)
    try:
        config = channel_secrets.opened(channel.kind, channel.config)
    except channel_secrets.SecretsUnavailable as exc:
        raise TransportError(str(exc), permanent=True) from None
    try:
        spec.send(config, spec.render(delivery))
    except TransportError as exc:
        error = TransportError(channel_secrets.redacted(channel.kind, config, exc.message), exc.permanent)
        error.refused_content = exc.permanent  # the kind's endpoint refused this message, not the setup
        raise error from None
    except Exception as exc:
        logger.error("%s: unexpected error in the %s transport:\n%s", channel.name, channel.kind,
                     channel_secrets.redacted(channel.kind, config, traceback.format_exc()))
        message = channel_secrets.redacted(channel.kind, config, f"{type(exc).__name__}: {exc}")
        raise TransportError(message) from None


def send_delivery(delivery_id, now=None):
    """Send one due delivery; returns its new status, or None when it was not ours to send."""
    now = now or clock.now()
    claimed = Delivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now).update(
        status=DeliveryStatus.SENDING, attempts=F("attempts") + 1, next_attempt_at=now + SENDING_LEASE)
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("channel", "job", "rule__owner", "rule__channel").get(pk=delivery_id)
    if delivery.run_id is None:
        return _send(delivery)
    traceparent = (JobRun.objects.filter(pk=delivery.run_id).values_list("traceparent", flat=True).first()
                   if tracing.enabled() else None)
    # In the run's trace whichever process sends, whenever (a retry after a backoff, a digest).
    with logs.about_run(delivery.run_id, job=getattr(delivery.job, "name", None)), tracing.step(
            "notification.send", {**tracing.run_attributes(delivery.run_id), "notification.event": delivery.event,
                                  "notification.channel.kind": delivery.channel.kind},
            traceparent=traceparent):
        status = _send(delivery)
        tracing.annotate({"notification.status": str(status)})
        return status


def _send(delivery):
    channel = delivery.channel
    try:
        if not channel.enabled:
            raise TransportError(f"channel disabled: {channel.disabled_reason or 'by a person'}", permanent=True)
        transmit(channel, delivery)
    except TransportError as exc:
        if getattr(exc, "refused_content", False) and (foreign := _foreign_rules(delivery)):
            for rule in foreign:
                pause_rule(rule, exc.message)
            return _finish(delivery, DeliveryStatus.FAILED, last_error=exc.message, next_attempt_at=None)
        return _record_error(delivery, exc.message, exc.permanent, clock.now())
    except Exception as exc:
        logger.exception("delivery %s: unexpected error in the %s transport", delivery.pk, channel.kind)
        return _record_error(delivery, f"{type(exc).__name__}: {exc}", False, clock.now())
    _finish(delivery, DeliveryStatus.SENT, sent_at=clock.now(), last_error="", next_attempt_at=None)
    if channel.last_error:
        type(channel).objects.filter(pk=channel.pk).update(last_error="")
    return DeliveryStatus.SENT


def _record_error(delivery, message, permanent, now):
    channel = delivery.channel
    if permanent:
        logger.warning("delivery %s to %s failed for good: %s", delivery.pk, channel, message)
        if channel.enabled:
            type(channel).objects.filter(pk=channel.pk).update(
                last_error=message, disabled_reason=message, enabled=False)
        return _finish(delivery, DeliveryStatus.FAILED, last_error=message, next_attempt_at=None)
    type(channel).objects.filter(pk=channel.pk).update(last_error=message)
    if delivery.attempts >= MAX_ATTEMPTS:
        logger.warning("delivery %s to %s given up after %s attempts: %s", delivery.pk, channel,
                       delivery.attempts, message)
        return _finish(delivery, DeliveryStatus.GIVEN_UP, last_error=message, next_attempt_at=None)
    return _finish(delivery, DeliveryStatus.PENDING, last_error=message, queued_at=None,
                   next_attempt_at=now + backoff(delivery.attempts))


def _foreign_rules(delivery):
    """The rules of others (``outbox.is_foreign``) whose content ``delivery`` carries: its own rule,
    or for a digest the rules of the deliveries folded into it (a flood of one user's failures)."""
    if delivery.event == "digest":
        rules = Rule.objects.filter(pk__in=delivery.folded.values("rule_id")).select_related("owner", "channel")
        return [rule for rule in rules.order_by("pk") if is_foreign(rule)]
    return [delivery.rule] if delivery.rule is not None and is_foreign(delivery.rule) else []


def pause_rule(rule, error):
    """Pause ``rule`` (not the channel) after its channel refused for good what it sent, and tell
    its owner: the reason on the rule (the API's ``paused_reason``), an audit entry about the rule
    (the service's), and an email when the owner has an address (best effort)."""
    reason = (f"Paused by the service: the channel {rule.channel.name} refused for good what this rule sent "
              f"({error[:500]}). The channel stays on for others. Change what the job sends, then enable the "
              "rule again.")
    with transaction.atomic():
        if not Rule.objects.filter(pk=rule.pk, enabled=True).update(enabled=False, paused_reason=reason):
            return False  # paused already (another delivery of it)
        trail.record_about(Subject.RULE, f"rule {rule.pk} -> {rule.channel.name}", Action.PAUSE, Source.SYSTEM,
                           actor_name="the service", changes={"enabled": [True, False]}, detail=reason)
    logger.warning("rule %s paused: channel %s refused its message for good: %s", rule.pk, rule.channel.name, error)
    if rule.owner is not None and rule.owner.email:
        try:
            send_mail(f"Your notification rule to {rule.channel.name} was paused", reason,
                      settings.DEFAULT_FROM_EMAIL, [rule.owner.email], fail_silently=False)
        except Exception as exc:  # the reason stays on the rule and in the trail
            logger.warning("could not email %s that rule %s was paused: %s", rule.owner.email, rule.pk, exc)
    return True


def _finish(delivery, status, **fields):
    # Only the claim that is still ours may write: send_due may have taken back an expired claim.
    Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SENDING, attempts=delivery.attempts).update(
        status=status, **fields)
    return status


def send_due(now=None, limit=500):
    """Publish a send task for each delivery whose time has come (a retry after backoff, a digest at
    the end of its minute, a task the broker lost, a sender that died). Never sends inline, so a
    slow endpoint cannot hold up the caller (the scheduler tick). Returns how many were published."""
    now = now or clock.now()
    Delivery.objects.filter(status=DeliveryStatus.SENDING, next_attempt_at__lte=now).update(
        status=DeliveryStatus.PENDING, queued_at=None, last_error="the sender stopped answering; sending again")
    due = (
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .filter(Q(queued_at__isnull=True) | Q(queued_at__lt=now - REQUEUE_AFTER))
        .order_by("next_attempt_at").values_list("pk", "queued_at")[:limit]
    )
    published = 0
    for pk, queued_at in due:
        if Delivery.objects.filter(pk=pk, status=DeliveryStatus.PENDING, queued_at=queued_at).update(queued_at=now):
            enqueue(pk)
            published += 1
    return published


def test_delivery(channel):
    """An unsaved delivery that says hello, for "Send a test notification"."""
    now = timezone.now().isoformat()
    payload = {
        "event": "test",
        "job": {"id": None, "name": "(test)"},
        "run": {"id": None, "status": "test", "attempt": 1, "max_attempts": 1, "scheduled_for": now,
                "started_at": None, "finished_at": None, "worker": "", "error": "", "reason": ""},
        "details": {},
    }
    return Delivery(event="test", channel=channel, payload=payload, dedup_key="test")


def send_test_notification(channel):
    """Send a test message to ``channel`` now; (sent, a sentence saying what happened)."""
    try:
        transmit(channel, test_delivery(channel))
    except TransportError as exc:
        Channel.objects.filter(pk=channel.pk).update(last_error=exc.message)
        return False, f"Could not send a test notification to {channel.name}: {exc.message}"
    Channel.objects.filter(pk=channel.pk).update(last_error="")
    return True, f"Sent a test notification to {channel.name}."
