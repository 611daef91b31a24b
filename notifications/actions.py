"""What a person does to a channel or a rule, one function per action: create, change, delete (and
send a test message through a channel); and acknowledging a job's open incident.

Every interface calls these (the admin, the API, ``jobs apply``) with a ``jobs.actions.jobs.Actor``.
Each checks the permission, makes the change and writes its audit entry, in one transaction.
An entry never holds a secret value: a channel's secret keys are shown as ``•••``, and
``••• (changed)`` when the value changed.

Channels follow Django's model permissions, not staff status: ``notifications.add_channel`` to
create one, ``change_channel`` to change or test one, ``delete_channel`` to delete one,
``view_channel`` (or ``change_channel``) to read a channel's configuration and errors. A user who is
not staff but holds them may act (through the API and the pages; the admin is staff's); the command
line acts as the operator, with every permission.

Teams (jobs.actions.permissions): a channel and a rule are their maker's and, when given, their
team's; staff may mark a channel ``shared``. A user who is not staff sees and points rules at
their own channels, their team's and the shared ones (``visible_channels``), changes, tests and
deletes only their own and their team's; sees and changes their own rules, their team's and the
rules of the jobs they see. Another's answers 404. Which rules a user may write also depends on
the rule's target (staff: any; others: one of their jobs), checked where the rule is read from the
request (the API's serializer, the file's plan).

Test sends are audited and at most ``NOTIFY_TEST_SENDS_PER_MINUTE`` a minute per user.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit import trail
from audit.models import Action, AuditEntry, Subject
from jobs.actions import owned, permissions
from jobs.actions.jobs import ActionError, may_act_on
from jobs.actions.snapshot import HIDDEN
from jobs.timing import clock

from . import channel_secrets
from .models import Channel, Delivery, DeliveryStatus, Incident, Rule, RuleScope
from .outbox import INCIDENT_EVENTS, payload_for
from .queueing import enqueue_pending
from .sending import send_test_notification

VERBS = {"add": "create", "change": "change or test", "delete": "delete", "view": "read the configuration of"}


def may(actor, permission):
    """Whether ``actor`` holds ``notifications.<permission>_channel`` (view: view or change)."""
    if actor.user is None:
        return True
    names = [permission] + (["change"] if permission == "view" else [])
    return any(actor.user.has_perm(f"notifications.{name}_channel") for name in names)


def denied_message(permission):
    return (f"You may not {VERBS[permission]} channels: that needs the notifications.{permission}_channel "
            "permission (channels serve everyone's jobs).")


def check(actor, permission):
    if not may(actor, permission):
        raise ActionError(denied_message(permission), ActionError.FORBIDDEN)


SHARED_CHANNEL = "Only staff may change, test or delete a shared channel; yours and your team's are yours to."


def visible_channels(user):
    """The channels ``user`` (None: the operator) sees and may point rules at."""
    return permissions.owned_or_shared(Channel.objects.all(), user)


def visible_rules(user):
    """The rules ``user`` sees and may change: their own, their team's, those of the jobs they see."""
    rules = Rule.objects.all()
    if user is None or permissions.sees_everything(user):
        return rules
    return rules.filter(Q(pk__in=permissions.owned_or_shared(Rule.objects.all(), user).values("pk"))
                        | Q(scope=RuleScope.JOB, job__in=permissions.visible_jobs(user)))


may_change_channel = owned.may_change


def _check_channel(actor, permission, channel=None):
    check(actor, permission)
    if channel is not None and not may_change_channel(actor, channel):
        raise ActionError(SHARED_CHANNEL, ActionError.FORBIDDEN)


def _record(actor, subject, name, action, changes=None, detail=""):
    trail.record_about(subject, name, action, actor.source, actor_name=actor.name, user=actor.user,
                       address=actor.address, changes=changes, detail=detail)


def _diff(before, after):
    before, after = before or {}, after or {}
    return {name: [before.get(name), after.get(name)] for name in {**before, **after}
            if before.get(name) != after.get(name)}


# --- channels


def channel_snapshot(channel, changed_secrets=()):
    """The channel's fields as the trail shows them, its secret values hidden."""
    secret = channel_secrets.secret_keys(channel.kind)
    config = {key: (f"{HIDDEN} (changed)" if key in changed_secrets else HIDDEN)
              if key in secret and value not in (None, "") else value
              for key, value in (channel.config or {}).items()}
    return {"name": channel.name, "kind": channel.kind, "enabled": channel.enabled, "config": config,
            "group": channel.group.name if channel.group_id else None, "shared": channel.shared}


def changed_secrets(stored, channel):
    """The secret keys the stored channel and the changed one both have, with different values."""
    keys = [key for key in channel_secrets.secret_keys(channel.kind)
            if (stored.config or {}).get(key) and (channel.config or {}).get(key)]
    try:
        old = channel_secrets.opened(stored.kind, stored.config or {})
        new = channel_secrets.opened(channel.kind, channel.config or {})
    except channel_secrets.SecretsUnavailable:
        return keys
    return [key for key in keys if old[key] != new[key]]


def create_channel(actor, channel, detail=""):
    check(actor, "add")
    owned.check_ownership(actor, channel)
    owned.claim(actor, channel)
    with transaction.atomic():
        channel.save()
        _record(actor, Subject.CHANNEL, channel.name, Action.CREATE, _diff(None, channel_snapshot(channel)), detail)
    return channel


def edit_channel(actor, channel, values=None, detail=""):
    """Set ``values`` on a saved channel and save it (``channel`` may carry its changes already, as
    the admin's form sets them). A stored secret value the change keeps is kept as it is stored.
    Enabling a channel clears the reason it was disabled."""
    check(actor, "change")
    with transaction.atomic():
        stored = Channel.objects.select_for_update().get(pk=channel.pk)
        _check_channel(actor, "change", stored)
        for name, value in (values or {}).items():
            setattr(channel, name, value)
        owned.check_ownership(actor, channel, stored)
        if refused := channel_secrets.moved(stored.kind, stored.config, channel.kind, channel.config):
            raise ActionError(f"config: {refused}", fields={"config": [refused]})
        if channel.enabled and not stored.enabled:
            channel.disabled_reason = ""  # enabled again by a person: the reason no longer holds
        if channel.kind == stored.kind and channel_secrets.same_secrets(channel.kind, stored.config, channel.config):
            channel.config = {**channel.config, **{key: stored.config[key] for key in channel_secrets.secret_keys(
                channel.kind) if key in channel.config and key in stored.config}}  # no needless new token
        secrets_changed = changed_secrets(stored, channel)
        channel.save()
        changes = _diff(channel_snapshot(stored), channel_snapshot(channel, secrets_changed))
        if changes:
            _record(actor, Subject.CHANNEL, channel.name, Action.CHANGE, changes, detail)
    return channel


def delete_channel(actor, channel, detail=""):
    """Delete the channel with its rules and deliveries."""
    _check_channel(actor, "delete", channel)
    with transaction.atomic():
        rules = channel.rules.count()
        _record(actor, Subject.CHANNEL, channel.name, Action.DELETE, _diff(channel_snapshot(channel), None),
                detail or (f"with its {rules} rule(s)" if rules else ""))
        channel.delete()


def send_test(actor, channel):
    """Send a test message through the channel now: (sent, a sentence saying what happened). Each
    is an audit entry; a user may send at most NOTIFY_TEST_SENDS_PER_MINUTE a minute (else
    ActionError TOO_MANY), whatever the channel."""
    _check_channel(actor, "change", channel)
    with transaction.atomic():
        if actor.user is not None:
            # Rows of the user locked one after the other: two test sends at once count each other.
            get_user_model().objects.select_for_update().filter(pk=actor.user.pk).exists()
            per_minute = settings.NOTIFY_TEST_SENDS_PER_MINUTE
            recent = AuditEntry.objects.filter(actor=actor.user, action=Action.TEST_SEND,
                                               created_at__gte=timezone.now() - timedelta(minutes=1)).count()
            if per_minute and recent >= per_minute:
                raise ActionError(f"At most {per_minute} test sends a minute (NOTIFY_TEST_SENDS_PER_MINUTE): try "
                                  "again in a minute.", ActionError.TOO_MANY)
        _record(actor, Subject.CHANNEL, channel.name, Action.TEST_SEND, detail="a test notification")
    sent, text = send_test_notification(channel)
    return sent, text


# --- rules


def rule_name(rule):
    """What the trail calls a rule: what it watches and where it sends."""
    target = {RuleScope.TAG: f"tag {rule.tag}", RuleScope.JOB: f"job {getattr(rule.job, 'name', rule.job_id)}"}.get(
        rule.scope, "all jobs")
    return f"{target} -> {rule.channel.name}"


def rule_snapshot(rule):
    return {"channel": rule.channel.name, "events": list(rule.events), "scope": rule.scope,
            "tag": rule.tag or None, "job": rule.job.name if rule.job_id else None, "enabled": rule.enabled,
            "group": rule.group.name if rule.group_id else None}


def _check_rule_channel(actor, rule, stored=None):
    """A rule sends to a channel its author may see (their own, their team's, a shared one)."""
    if stored is not None and rule.channel_id == stored.channel_id:
        return
    if not visible_channels(actor.user).filter(pk=rule.channel_id).exists():
        message = "No channel with this id that you may use: your own, your team's, or a shared one."
        raise ActionError(message, ActionError.INVALID, fields={"channel": [message]})


def create_rule(actor, rule, detail=""):
    """Save a new rule: the actor's, and their team's when ``group`` is given."""
    _check_rule_channel(actor, rule)
    owned.check_ownership(actor, rule)
    owned.claim(actor, rule)
    with transaction.atomic():
        rule.save()
        _record(actor, Subject.RULE, rule_name(rule), Action.CREATE, _diff(None, rule_snapshot(rule)), detail)
    return rule


def edit_rule(actor, rule, values=None, detail=""):
    with transaction.atomic():
        stored = Rule.objects.select_for_update(of=("self",)).select_related("channel", "job").get(pk=rule.pk)
        if not visible_rules(actor.user).filter(pk=rule.pk).exists():
            raise ActionError("No rule with this id that you may change.", ActionError.FORBIDDEN)
        for name, value in (values or {}).items():
            setattr(rule, name, value)
        _check_rule_channel(actor, rule, stored)
        owned.check_ownership(actor, rule, stored)
        if rule.enabled and not stored.enabled:
            rule.paused_reason = ""  # enabled again by a person: the reason no longer holds
        rule.save()
        if changes := _diff(rule_snapshot(stored), rule_snapshot(rule)):
            _record(actor, Subject.RULE, rule_name(rule), Action.CHANGE, changes, detail)
    return rule


def delete_rule(actor, rule, detail=""):
    if not visible_rules(actor.user).filter(pk=rule.pk).exists():
        raise ActionError("No rule with this id that you may delete.", ActionError.FORBIDDEN)
    with transaction.atomic():
        _record(actor, Subject.RULE, rule_name(rule), Action.DELETE, _diff(rule_snapshot(rule), None), detail)
        rule.delete()


# --- incidents


def open_incident(job):
    return Incident.objects.filter(job=job, closed_at__isnull=True).first()


def acknowledge(actor, job, incident_id=None):
    """Acknowledge ``job``'s open incident (``incident_id``: that one, as a signed link names it):
    a person is on it. Whoever may act on the job may (the interface finds the job among those the
    actor sees). The channels told of the incident hear it (an ``acknowledged`` delivery each:
    PagerDuty's and Opsgenie's alert is acknowledged, the others get a message), and the audit
    entry is about the job. An incident closed, or acknowledged already, is a CONFLICT."""
    if not may_act_on(actor, job):
        raise ActionError(permissions.COMMAND_JOBS_DENIED, ActionError.FORBIDDEN)
    with transaction.atomic():
        incident = Incident.objects.select_for_update().filter(job=job, closed_at__isnull=True).first()
        if incident is None or incident_id is not None and incident.pk != incident_id:
            raise ActionError(f"{job.name} has no open incident to acknowledge"
                              + (" (the link's incident is over)." if incident_id is not None else "."),
                              ActionError.CONFLICT)
        if incident.acknowledged_at is not None:
            raise ActionError(f"{job.name}'s incident was acknowledged already, by {incident.acknowledged_by_name} at "
                              f"{incident.acknowledged_at.isoformat(timespec='seconds')}.", ActionError.CONFLICT)
        now = clock.now()
        Incident.objects.filter(pk=incident.pk).update(acknowledged_at=now, acknowledged_by=actor.user,
                                                       acknowledged_by_name=actor.name[:255])
        incident.acknowledged_at, incident.acknowledged_by_name = now, actor.name[:255]
        told = _tell_acknowledged(incident, job, actor, now)
        trail.record(job, Action.ACKNOWLEDGE, actor.source, user=actor.user, actor_name=actor.name,
                     address=actor.address, run=incident.run,
                     detail=f"incident {incident.pk}; told {told} channel(s)" if told else f"incident {incident.pk}")
    return incident


def _tell_acknowledged(incident, job, actor, now):
    """An ``acknowledged`` delivery to each enabled channel that was sent (or is sending) a failure
    of the incident; how many."""
    told = Delivery.objects.filter(job=job, event__in=INCIDENT_EVENTS, created_at__gte=incident.opened_at,
                                   status__in=[DeliveryStatus.SENT, DeliveryStatus.PENDING, DeliveryStatus.SENDING],
                                   channel__enabled=True)
    channels = Channel.objects.filter(pk__in=told.values("channel_id")).order_by("pk")
    run = incident.run
    payload = payload_for(run, "acknowledged", {"by": actor.name, "at": now.isoformat()}) if run else {
        "event": "acknowledged", "job": {"id": job.pk, "name": job.name}, "run": {"id": None},
        "details": {"by": actor.name, "at": now.isoformat()}}
    rows = [Delivery(event="acknowledged", channel=channel, run=run, job=job, created_at=now, next_attempt_at=now,
                     queued_at=now, dedup_key=f"acknowledged:{incident.pk}:{channel.pk}", payload=payload)
            for channel in channels]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    keys = [row.dedup_key for row in rows]
    if keys:
        transaction.on_commit(lambda: enqueue_pending(keys))
    return len(rows)


# --- secrets rotate (registered with jobs.access.secrets in NotificationsConfig.ready)


def rotate_channel_secrets():
    """Encrypt every channel's secret values again with the first key; how many channels had some.
    Runs inside ``secrets rotate``'s transaction."""
    count = 0
    for channel in Channel.objects.select_for_update().only("pk", "kind", "config").order_by("pk"):
        try:
            config = channel_secrets.rotated(channel.kind, channel.config)
        except channel_secrets.job_secrets.SecretsUnavailable:
            raise channel_secrets.SecretsUnavailable(
                f"channel {channel.pk}: a stored secret value cannot be decrypted with any key of "
                "JOBS_SECRETS_KEYS.") from None
        if config is not None:
            Channel.objects.filter(pk=channel.pk).update(config=config)
            count += 1
    return count
