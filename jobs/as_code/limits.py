"""The ``limits:`` section of a jobs file: limits shared across jobs, planned and saved before the
``jobs:`` section, so a job of the same file may name one (its ``limit_key``).

An entry is a limit of the API (``key``, ``max_running``, optional ``max_starts_per_minute`` and
``description``), checked by its serializer. Applying the file makes each limit match it (a field
left out goes back to its default); with ``--prune`` a limit the file leaves out is deleted, unless
a job still names it. A user's file holds the limits they see (their own, their team's, the shared
ones), and changes and prunes their own and their team's (``jobs.actions.limits``); anyone may apply
a file whose limits are as they are stored.
"""

from dataclasses import dataclass

from rest_framework.serializers import ValidationError, as_serializer_error

from ..actions import limits as actions
from ..models import Limit
from ..schemas.limits import LimitSerializer
from . import files

FIELDS = actions.EDITABLE
# A field left out goes back to its default; who shares a limit (group, shared) is kept as it is.
DEFAULTS = {"max_starts_per_minute": None, "description": ""}


def export_limits(actor):
    entries = []
    for limit in actions.visible(actor.user).select_related("group").order_by("key"):
        entry = {name: getattr(limit, name) for name in ("key", "max_running", *DEFAULTS)
                 if getattr(limit, name) != DEFAULTS.get(name)}
        if limit.group_id:
            entry["group"] = limit.group.name
        if limit.shared:
            entry["shared"] = True
        entries.append(entry)
    return entries


@dataclass
class LimitChange:
    entry: files.Entry
    limit: Limit
    values: dict
    changed: list  # (field, old, new) of an update

    @property
    def is_new(self):
        return self.limit.pk is None


@dataclass
class LimitPlan(files.Plan):
    def created(self, change):
        return f"+ create limit {change.limit.key}"

    def updated(self, change):
        diffs = ", ".join(f"{name}: {files.show(old)} -> {files.show(new)}" for name, old, new in change.changed)
        return f"~ update limit {change.limit.key}: {diffs}"

    def deleted(self, limit):
        return f"- delete limit {limit.key}"

    def unchanged_line(self):
        return f"= limits unchanged: {self.unchanged}"


def plan_limits(entries, actor, prune, earlier):
    existing = {limit.key: limit for limit in actions.visible(actor.user)}
    errors, changes, seen, unchanged = [], [], {}, 0
    for entry in entries:
        data = entry.data
        if not isinstance(data, dict):
            errors.append(f"{entry.where}: must be an object with key and max_running.")
            continue
        unknown = [f"{entry.where}: unknown key '{name}'." for name in data if name not in FIELDS]
        key = data.get("key") if isinstance(data.get("key"), str) else None
        if key in seen:
            errors.append(f"{entry.where}: duplicate key, already used by limits[{seen[key]}].")
            continue
        if key is not None:
            seen[key] = entry.index
        stored = existing.get(key)
        serializer = LimitSerializer(stored, data={**DEFAULTS, **data})
        try:
            values = serializer.run_validation({**DEFAULTS, **data})
        except ValidationError as exc:
            errors += unknown + [f"{entry.where}: {line}" for line in files.messages_of(as_serializer_error(exc))]
            continue
        if unknown:
            errors += unknown
            continue
        if stored is None:
            changes.append(LimitChange(entry, Limit(**values), values, []))
            continue
        changed = [(name, getattr(stored, name), value) for name, value in values.items()
                   if getattr(stored, name) != value]
        if changed and not actions.may_edit(actor, stored):
            errors.append(f"{entry.where}: {actions.STAFF_ONLY}")
        if changed:
            changes.append(LimitChange(entry, stored, values, changed))
        else:
            unchanged += 1
    deletions = sorted((limit for key, limit in existing.items() if key not in seen and actions.may_edit(actor, limit)),
                       key=lambda lim: lim.key) if prune else []
    return LimitPlan(changes, deletions, unchanged), errors


def apply_limits(plan, actor):
    errors = []
    for change in plan.changes:
        try:
            if change.is_new:
                actions.create_limit(actor, change.limit, detail="jobs apply")
            else:
                actions.edit_limit(actor, change.limit, change.values, detail="jobs apply")
        except actions.ActionError as exc:
            errors.append(f"{change.entry.where}: {exc.message}")
    return errors


def delete_limits(plan, actor):
    errors = []
    for limit in plan.deletions:
        try:
            actions.delete_limit(actor, limit, detail="jobs apply --prune")
        except actions.ActionError as exc:
            errors.append(f"limits: - delete limit {limit.key}: {exc.message}")
    return errors


files.register(files.Section("limits", export=export_limits, plan=plan_limits, apply=apply_limits,
                             delete=delete_limits), before="jobs")
