"""Calendars in a jobs-as-code file: the ``calendars:`` list, planned and applied before ``jobs:``
(whose entries may name them) and pruned after them.

A calendar in a file is its API shape without what the service sets: ``name`` always; ``dates``
(a date as "2026-12-31", or {date, label} when it has a label), ``description``, ``country`` and
``subdivision`` when not empty. Everybody may export them; only staff (and the operator on the
command line) may change them: a user's file whose calendars differ from the stored ones is refused
with the reason, one that matches them applies.
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError

from ..actions import calendars as actions
from ..actions.jobs import ActionError
from ..models import Calendar
from ..models.calendar import normalised_dates
from . import files
from .files import Plan

FIELDS = ["name", "description", "country", "subdivision", "dates"]
DEFAULTS = {"description": "", "country": "", "subdivision": "", "dates": []}


def calendar_entry(calendar):
    entry = {"name": calendar.name}
    for name in ("description", "country", "subdivision"):
        if getattr(calendar, name):
            entry[name] = getattr(calendar, name)
    if calendar.dates:
        entry["dates"] = [item if item.get("label") else item["date"] for item in calendar.dates]
    return entry


def export_entries(actor):
    return [calendar_entry(calendar) for calendar in actions.visible(actor.user).order_by("name")]


@dataclass
class Change:
    entry: object  # jobs.as_code.files.Entry
    calendar: Calendar
    values: dict
    changed: list = field(default_factory=list)

    def __post_init__(self):
        self.is_new = self.calendar.pk is None


@dataclass
class CalendarPlan(Plan):
    def created(self, change):
        return f"+ create calendar {change.calendar.name}"

    def updated(self, change):
        return f"~ update calendar {change.calendar.name}: {', '.join(key for key, *_ in change.changed)}"

    def deleted(self, calendar):
        return f"- delete calendar {calendar.name}"

    def unchanged_line(self):
        return f"= unchanged calendars: {self.unchanged}"


def parse_entry(entry):
    """The entry's values, checked as the model checks them; raises ValidationError with messages
    that name the entry and the key."""
    data, here = entry.data, entry.where
    if not isinstance(data, dict):
        raise ValidationError([f"{here}: must be an object with a name and dates."])
    errors = [f"{here}: unknown key '{key}'." for key in data if key not in FIELDS]
    if "name" not in data:
        errors.append(f"{here}: name: This field is required.")
    values = {"name": data.get("name"), **{name: data.get(name, default) for name, default in DEFAULTS.items()}}
    for name in ("name", "description", "country", "subdivision"):
        if not isinstance(values[name], str) or "\x00" in values[name]:
            errors.append(f"{here}: {name}: Must be a text (without NUL characters).")
    if errors:
        raise ValidationError(errors)
    try:
        values["dates"] = normalised_dates(values["dates"])  # a YAML date is a date: made text first
        calendar = Calendar(**values)
        calendar.full_clean(validate_unique=False)
    except ValidationError as exc:
        raise ValidationError([f"{here}: {key}: {m}" for key, ms in exc.message_dict.items() for m in ms]) from None
    return {name: getattr(calendar, name) for name in FIELDS}


def plan_calendars(entries, actor, prune, earlier):
    errors, changes, seen, unchanged = [], [], {}, 0
    existing = {calendar.name: calendar for calendar in actions.visible(actor.user)}
    for entry in entries:
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        if isinstance(name, str) and name in seen:
            errors.append(f"{entry.where}: duplicate name, already used by calendars[{seen[name]}].")
            continue
        if isinstance(name, str):
            seen[name] = entry.index
        try:
            values = parse_entry(entry)
        except ValidationError as exc:
            errors += exc.messages
            continue
        calendar = existing.get(values["name"])
        if calendar is None:
            changes.append(Change(entry, Calendar(**values), values))
            continue
        changed = [(key, getattr(calendar, key), value) for key, value in values.items() if getattr(calendar, key) != value]
        if changed:
            changes.append(Change(entry, calendar, values, changed))
        else:
            unchanged += 1
    deletions = sorted((c for n, c in existing.items() if n not in seen and actions.may_edit(actor, c)),
                       key=lambda c: c.name) if prune else []
    plan = CalendarPlan(changes, deletions, unchanged)
    errors += [f"{change.entry.where}: {actions.STAFF_ONLY}" for change in plan.changes
               if not change.is_new and not actions.may_edit(actor, change.calendar)]
    return plan, errors


def apply_changes(plan, actor):
    errors = []
    for change in plan.changes:
        try:
            if change.is_new:
                actions.create(actor, change.calendar)
            else:
                actions.edit(actor, change.calendar, change.values)
        except ActionError as exc:
            errors += [f"{change.entry.where}: {m}" for messages in exc.fields.values() for m in messages]
        except DatabaseError as exc:
            errors.append(f"{change.entry.where}: {str(exc).strip()}")
    return errors


def delete_pruned(plan, actor):
    errors = []
    for calendar in plan.deletions:
        try:
            actions.delete(actor, calendar)
        except ActionError as exc:
            errors.append(f"calendars: - delete {calendar.name}: {exc.message}")
    return errors


files.register(files.Section("calendars", export=export_entries, plan=plan_calendars, apply=apply_changes,
                             delete=delete_pruned), before="jobs")
