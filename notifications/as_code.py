"""Channels and rules in a jobs-as-code file: the ``channels:`` and ``rules:`` lists next to
``jobs:``, planned, applied and pruned like jobs (``jobs.as_code``; named in
``NotificationsConfig.ready``, so they are planned after the jobs and pruned before them).

A channel is ``name`` (its identity), ``kind``, ``config`` and ``enabled``, checked by the API's
``ChannelSerializer`` (one schema, one set of messages). Its secret values (``channel_secrets``: a
Slack URL, a webhook secret) are write-only: a file gives them from the environment of
``manage.py`` (``url_env: SLACK_URL`` names the variable), or in clear, or as the mask the export
writes (the stored value is kept). They are never printed in a plan or written to the audit trail:
a plan says only that a secret changed. Through the API, ``*_env`` is refused: the server's
environment is not the client's.

A rule is ``channel`` (a channel's name), ``events``, ``scope`` with its ``tag`` or ``job`` (a job's
name) and ``enabled``. Its identity is what it watches and where it sends (channel, scope, tag or
job): a file lists each once, and a change of its events or enabled updates it. Channels and the
rules for all jobs or a tag are staff's; another user's file may hold rules for their own jobs.
Channels follow the model permissions (``notifications.actions``): creating one needs
``add_channel``, changing one ``change_channel``, pruning one ``delete_channel``, and the export
lists them to holders of ``view_channel`` or ``change_channel``. Every change goes through
``notifications.actions`` (one audit entry each).
"""

import os
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError

from audit.models import Source
from jobs.actions.jobs import ActionError
from jobs.actions.permissions import sees_everything, visible_jobs
from jobs.as_code.files import Plan, Section, messages_of, register, show
from jobs.models import Job

from . import actions, channel_secrets
from .models import RULE_EVENTS, Channel, Rule, RuleScope
from .schemas import ChannelSerializer

CHANNEL_FIELDS = ["name", "kind", "config", "enabled"]
RULE_FIELDS = ["channel", "events", "scope", "tag", "job", "enabled"]
ENV_SUFFIX = "_env"
NO_CHANNEL_PERMISSION = ("you may not apply channels: that needs the notifications.add_channel, change_channel "
                         "or delete_channel permission (channels serve everyone's jobs).")


def staff(actor):
    return actor.user is None or sees_everything(actor.user)


@dataclass
class Change:
    entry: object  # jobs.as_code.files.Entry
    obj: object  # the Channel or Rule, unsaved when new
    values: dict
    name: str  # as the plan shows it
    changed: list = field(default_factory=list)  # "key" or "key: old -> new" of an update

    def __post_init__(self):
        self.is_new = self.obj.pk is None


@dataclass
class SectionPlan(Plan):
    noun: str = ""
    names_after: set = field(default_factory=set)

    def created(self, change):
        return f"+ create {self.noun} {change.name}"

    def updated(self, change):
        return f"~ update {self.noun} {change.name}: {', '.join(change.changed)}"

    def deleted(self, obj):
        return f"- delete {self.noun} {label(obj)}"

    def unchanged_line(self):
        return f"= unchanged {self.noun}s: {self.unchanged}"


def label(obj):
    if isinstance(obj, Channel):
        return obj.name
    return rule_label(rule_identity(obj))


def rule_label(identity):
    channel, scope, target = identity
    return f"{scope}{' ' + target if target else ''} -> {channel}"


# --- channels


def export_channels(actor):
    if not actions.may(actor, "view"):
        return []
    entries = []
    for channel in actions.visible_channels(actor.user).order_by("name", "id"):
        entry = {"name": channel.name, "kind": channel.kind,
                 "config": channel_secrets.masked(channel.kind, channel.config)}
        if not channel.enabled:
            entry["enabled"] = False
        entries.append(entry)
    return entries


def from_environment(entry, config, actor):
    """``config`` with each ``<key>_env: VARIABLE`` replaced by the variable's value (under ``key``)."""
    errors, resolved = [], {}
    for key, value in config.items():
        if not (isinstance(key, str) and key.endswith(ENV_SUFFIX)):
            resolved.setdefault(key, value)
            continue
        name = key[:-len(ENV_SUFFIX)]
        if actor.source != Source.CLI:
            errors.append(f"{entry.where}: config.{key}: values from the environment are read by `manage.py jobs "
                          "apply` only; through the API give the value (or the mask to keep the stored one).")
        elif not isinstance(value, str) or not value:
            errors.append(f"{entry.where}: config.{key}: must name an environment variable.")
        elif name in config:
            errors.append(f"{entry.where}: config.{key}: give {name} or {key}, not both.")
        elif value not in os.environ:
            errors.append(f"{entry.where}: config.{key}: the environment variable {value} is not set.")
        else:
            resolved[name] = os.environ[value]
    return resolved, errors


def config_changes(kind, old, new):
    """What changed in a config, secret values named and never shown."""
    out = []
    for key in sorted(set(old) | set(new), key=str):
        secret = key in channel_secrets.secret_keys(kind)
        if secret and key in old and key in new and channel_secrets.same_secrets(kind, {key: old[key]},
                                                                                 {key: new[key]}):
            continue  # the stored (encrypted) value, given again in clear or as the mask
        if not secret and old.get(key) == new.get(key):
            continue
        if secret:
            out.append(f"config.{key} (secret) {'changed' if key in old and key in new else 'set' if key in new else 'removed'}")
        else:
            out.append(f"config.{key}: {show(old.get(key))} -> {show(new.get(key))}")
    return out


def plan_channels(entries, actor, prune, earlier):
    existing = {channel.name: channel for channel in actions.visible_channels(actor.user).order_by("id")}
    if not any(actions.may(actor, permission) for permission in ("add", "change", "delete")):
        return SectionPlan([], [], 0, noun="channel", names_after=set(existing)), [f"channels: {NO_CHANNEL_PERMISSION}"]
    errors, changes, seen, unchanged = [], [], {}, 0
    for entry in entries:
        data = entry.data
        if not isinstance(data, dict):
            errors.append(f"{entry.where}: must be an object with name, kind and config.")
            continue
        name = data.get("name")
        if isinstance(name, str) and name in seen:
            errors.append(f"{entry.where}: duplicate name, already used by channels[{seen[name]}].")
            continue
        if isinstance(name, str):
            seen[name] = entry.index
        problems = [f"{entry.where}: unknown key '{key}'." for key in data if key not in CHANNEL_FIELDS]
        config = data.get("config", {})
        if isinstance(config, dict):
            config, env_errors = from_environment(entry, config, actor)
            problems += env_errors
        channel = existing.get(name) if isinstance(name, str) else None
        serializer = ChannelSerializer(channel, data={"enabled": True, **data, "config": config})
        if not serializer.is_valid():  # a message that quotes a secret value has it masked
            kind = data.get("kind") if isinstance(data.get("kind"), str) else ""
            problems += [f"{entry.where}: {channel_secrets.redacted(kind, config, line)}"
                         for line in messages_of(serializer.errors)]
        if problems:
            errors += problems
            continue
        values = {key: serializer.validated_data[key] for key in CHANNEL_FIELDS}
        if channel is None:
            if not actions.may(actor, "add"):
                errors.append(f"{entry.where}: {actions.denied_message('add')}")
            changes.append(Change(entry, Channel(), values, values["name"]))
            continue
        changed = [f"{key}: {show(getattr(channel, key))} -> {show(values[key])}"
                   for key in ("kind", "enabled") if getattr(channel, key) != values[key]]
        changed += config_changes(values["kind"], channel.config or {}, values["config"])
        if changed and not actions.may(actor, "change"):
            errors.append(f"{entry.where}: {actions.denied_message('change')}")
        elif changed and not actions.may_change_channel(actor, channel):
            errors.append(f"{entry.where}: {actions.SHARED_CHANNEL}")
        if changed:
            changes.append(Change(entry, channel, values, channel.name, changed))
        else:
            unchanged += 1
    deletions = [channel for name, channel in sorted(existing.items())
                 if name not in seen and actions.may_change_channel(actor, channel)] if prune else []
    if deletions and not actions.may(actor, "delete"):
        errors.append(f"channels: - delete {', '.join(c.name for c in deletions)}: {actions.denied_message('delete')}")
    names_after = set(seen) | (set(existing) - {channel.name for channel in deletions})
    return SectionPlan(changes, deletions, unchanged, noun="channel", names_after=names_after), errors


def apply_channels(plan, actor):
    errors = []
    for change in plan.changes:
        channel = change.obj
        for key, value in change.values.items():
            setattr(channel, key, value)
        errors += saved(change, actor, actions.create_channel, actions.edit_channel,
                        refusals=(ActionError, DatabaseError))
    return errors


def saved(change, actor, create, edit, refusals=()):
    """Check ``change.obj`` and save it through the action ``create`` (a new one) or ``edit``: its
    errors, each naming the entry; of the other errors, ``refusals`` are told the same way."""
    try:
        change.obj.full_clean()
        (create if change.is_new else edit)(actor, change.obj, detail="jobs apply")
    except ValidationError as exc:
        return [f"{change.entry.where}: {line}" for line in messages_of(exc.message_dict)]
    except refusals as exc:
        message = exc.message if isinstance(exc, ActionError) else str(exc).strip()
        return [f"{change.entry.where}: {message}"]
    return []


def delete_channels(plan, actor):
    for channel in plan.deletions:
        actions.delete_channel(actor, channel, detail="jobs apply --prune")
    return []


# --- rules


def rule_identity(rule):
    target = rule.tag if rule.scope == RuleScope.TAG else rule.job.name if rule.scope == RuleScope.JOB else ""
    return (rule.channel.name, rule.scope, target)


def rules_of(actor):
    return actions.visible_rules(actor.user).select_related("channel", "job").order_by("id")


def export_rules(actor):
    entries = []
    for rule in sorted(rules_of(actor), key=rule_identity):
        entry = {"channel": rule.channel.name, "events": list(rule.events), "scope": rule.scope}
        if rule.scope == RuleScope.TAG:
            entry["tag"] = rule.tag
        if rule.scope == RuleScope.JOB:
            entry["job"] = rule.job.name
        if not rule.enabled:
            entry["enabled"] = False
        entries.append(entry)
    return entries


def rule_values(entry, channels, jobs, actor):
    """The entry's values with the names it gives (channel, job); raises ValidationError with lines."""
    data, here = entry.data, entry.where
    if not isinstance(data, dict):
        raise ValidationError([f"{here}: must be an object with channel, events and scope."])
    errors = [f"{here}: unknown key '{key}'." for key in data if key not in RULE_FIELDS]
    errors += [f"{here}: {key}: This field is required." for key in ("channel", "events") if key not in data]
    values = {"channel": data.get("channel"), "events": data.get("events"), "scope": data.get("scope", RuleScope.ALL),
              "tag": data.get("tag", ""), "job": data.get("job"), "enabled": data.get("enabled", True)}
    if "channel" in data and values["channel"] not in channels:
        errors.append(f"{here}: channel: no channel named {show(values['channel'])}, in the file or the database.")
    allowed = [value for value, _ in RULE_EVENTS]
    events = values["events"]
    if "events" in data and (not isinstance(events, list) or not events or not all(e in allowed for e in events)):
        errors.append(f"{here}: events: A non-empty list of: {', '.join(sorted(allowed))}.")
    scope = values["scope"]
    if scope not in RuleScope.values:
        errors.append(f"{here}: scope: Must be one of {', '.join(RuleScope.values)}.")
    elif not staff(actor) and scope != RuleScope.JOB:
        errors.append(f"{here}: scope: Only staff may add rules for all jobs or a tag; yours name one of your jobs "
                      "(scope job).")
    if scope == RuleScope.TAG and (not isinstance(values["tag"], str) or not values["tag"]):
        errors.append(f"{here}: tag: Name the tag.")
    if scope == RuleScope.JOB and values["job"] not in jobs:
        errors.append(f"{here}: job: " + (f"no job named {show(values['job'])} that you can see, in the file or the "
                                          "database." if values["job"] is not None else "Name the job."))
    if not isinstance(values["enabled"], bool):
        errors.append(f"{here}: enabled: Must be true or false.")
    for key in ("tag", "job"):
        if key in data and scope != key:
            errors.append(f"{here}: {key}: only with scope {key}.")
    if errors:
        raise ValidationError(errors)
    values["events"] = list(dict.fromkeys(events))
    return values


def plan_rules(entries, actor, prune, earlier):
    channels = earlier["channels"].names_after if "channels" in earlier else set(
        actions.visible_channels(actor.user).values_list("name", flat=True))
    visible = Job.objects.all() if actor.user is None else visible_jobs(actor.user)
    jobs = set(visible.values_list("name", flat=True))
    if "jobs" in earlier:
        jobs = earlier["jobs"].names_after if staff(actor) else jobs | earlier["jobs"].names_after
    existing = {}
    for rule in rules_of(actor):
        existing.setdefault(rule_identity(rule), rule)
    errors, changes, seen, unchanged = [], [], {}, 0
    for entry in entries:
        try:
            values = rule_values(entry, channels, jobs, actor)
        except ValidationError as exc:
            errors += exc.messages
            continue
        identity = (values["channel"], values["scope"], values["tag"] or values["job"] or "")
        if identity in seen:
            errors.append(f"{entry.where}: duplicate rule, already given by rules[{seen[identity]}] "
                          f"({rule_label(identity)}).")
            continue
        seen[identity] = entry.index
        rule = existing.get(identity)
        if rule is None:
            changes.append(Change(entry, Rule(events=values["events"], scope=values["scope"],
                                              tag=values["tag"] if values["scope"] == RuleScope.TAG else "",
                                              enabled=values["enabled"]), values, rule_label(identity)))
            continue
        changed = [f"{key}: {show(getattr(rule, key))} -> {show(values[key])}" for key in ("events", "enabled")
                   if getattr(rule, key) != values[key]]
        if changed:
            changes.append(Change(entry, rule, values, rule_label(identity), changed))
        else:
            unchanged += 1
    kept = {rule.pk for identity, rule in existing.items() if identity in seen}
    deletions = [rule for rule in rules_of(actor) if rule.pk not in kept]
    return SectionPlan(changes, deletions if prune else [], unchanged, noun="rule"), errors


def apply_rules(plan, actor):
    errors = []
    channels = {channel.name: channel for channel in actions.visible_channels(actor.user)}
    for change in plan.changes:
        rule, values = change.obj, change.values
        rule.channel = channels[values["channel"]]
        rule.job = Job.objects.get(name=values["job"]) if values["scope"] == RuleScope.JOB else None
        rule.events, rule.enabled = values["events"], values["enabled"]
        errors += saved(change, actor, actions.create_rule, actions.edit_rule)
    return errors


def delete_rules(plan, actor):
    for rule in plan.deletions:
        actions.delete_rule(actor, rule, detail="jobs apply --prune")
    return []


register(Section("channels", export=export_channels, plan=plan_channels, apply=apply_channels, delete=delete_channels))
register(Section("rules", export=export_rules, plan=plan_rules, apply=apply_rules, delete=delete_rules))
