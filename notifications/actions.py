"""What a person does to a channel or a rule, one function per action: create, change, delete (and
send a test message through a channel).

Every interface calls these (the admin, the API, ``jobs apply``) with a ``jobs.actions.jobs.Actor``.
Each checks the permission, makes the change and writes its audit entry, in one transaction.
An entry never holds a secret value: a channel's secret keys are shown as ``•••``, and
``••• (changed)`` when the value changed.

Channels serve everyone's jobs, so they follow Django's model permissions, not staff status:
``notifications.add_channel`` to create one, ``change_channel`` to change or test one,
``delete_channel`` to delete one, ``view_channel`` (or ``change_channel``) to read a channel's
configuration and errors. A user who is not staff but holds them may act (through the API and the
pages; the admin is staff's); the command line acts as the operator, with every permission. Who
may write which rule (staff: any; others: the rules of their jobs) is checked where the rule is
read from the request (the API's serializer, the file's plan), as it depends on the rule's target.
"""

from django.db import transaction

from audit import trail
from audit.models import Action, Subject
from jobs.actions.jobs import ActionError
from jobs.actions.snapshot import HIDDEN

from . import channel_secrets
from .models import Channel, Rule, RuleScope
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
    return {"name": channel.name, "kind": channel.kind, "enabled": channel.enabled, "config": config}


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
        for name, value in (values or {}).items():
            setattr(channel, name, value)
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
    check(actor, "delete")
    with transaction.atomic():
        rules = channel.rules.count()
        _record(actor, Subject.CHANNEL, channel.name, Action.DELETE, _diff(channel_snapshot(channel), None),
                detail or (f"with its {rules} rule(s)" if rules else ""))
        channel.delete()


def send_test(actor, channel):
    """Send a test message through the channel now: (sent, a sentence saying what happened)."""
    check(actor, "change")
    return send_test_notification(channel)


# --- rules


def rule_name(rule):
    """What the trail calls a rule: what it watches and where it sends."""
    target = {RuleScope.TAG: f"tag {rule.tag}", RuleScope.JOB: f"job {getattr(rule.job, 'name', rule.job_id)}"}.get(
        rule.scope, "all jobs")
    return f"{target} -> {rule.channel.name}"


def rule_snapshot(rule):
    return {"channel": rule.channel.name, "events": list(rule.events), "scope": rule.scope,
            "tag": rule.tag or None, "job": rule.job.name if rule.job_id else None, "enabled": rule.enabled}


def create_rule(actor, rule, detail=""):
    with transaction.atomic():
        rule.save()
        _record(actor, Subject.RULE, rule_name(rule), Action.CREATE, _diff(None, rule_snapshot(rule)), detail)
    return rule


def edit_rule(actor, rule, values=None, detail=""):
    with transaction.atomic():
        stored = Rule.objects.select_for_update(of=("self",)).select_related("channel", "job").get(pk=rule.pk)
        for name, value in (values or {}).items():
            setattr(rule, name, value)
        rule.save()
        if changes := _diff(rule_snapshot(stored), rule_snapshot(rule)):
            _record(actor, Subject.RULE, rule_name(rule), Action.CHANGE, changes, detail)
    return rule


def delete_rule(actor, rule, detail=""):
    with transaction.atomic():
        _record(actor, Subject.RULE, rule_name(rule), Action.DELETE, _diff(rule_snapshot(rule), None), detail)
        rule.delete()


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
