"""The section of a jobs file of a resource declared once (``jobs.resources.Resource`` and its
``FileSection``): ``limits:``, ``calendars:``.

An entry is the resource as its ``parse`` reads it (the same checks and messages as the API), named
by the resource's ``name_field``. Exported, an entry holds the section's fields that are not empty
(a record it names by that record's name). Applying the file makes each stored one match its entry;
with ``--prune`` one the file leaves out is deleted. A user's file holds what the resource's
``visible`` gives them and changes and prunes what its ``may_edit`` lets them; anyone may apply a
file whose entries are as they are stored. Every change is one of the resource's actions (its
audit entry).
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError
from django.db.models import Model

from ..actions.errors import ActionError
from . import files


def empty(value):
    return value is None or value is False or (isinstance(value, str | list) and not value)  # 0 is a value


@dataclass
class Change:
    entry: files.Entry
    obj: Model  # unsaved when new
    values: dict
    changed: list = field(default_factory=list)  # (field, old, new) of an update

    def __post_init__(self):
        self.is_new = self.obj.pk is None  # as planned: the counts are read after the save too


@dataclass
class ResourcePlan(files.Plan):
    resource: object = None

    def name(self, obj):
        return f"{self.resource.noun} {getattr(obj, self.resource.name_field)}"

    def created(self, change):
        return f"+ create {self.name(change.obj)}"

    def updated(self, change):
        if self.resource.file.shows_values:
            diffs = ", ".join(f"{name}: {files.show(old)} -> {files.show(new)}" for name, old, new in change.changed)
        else:
            diffs = ", ".join(name for name, *_ in change.changed)
        return f"~ update {self.name(change.obj)}: {diffs}"

    def deleted(self, obj):
        return f"- delete {self.name(obj)}"

    def unchanged_line(self):
        return self.resource.file.unchanged.format(noun=self.resource.noun, count=self.unchanged)


def section_of(resource, parse, exported=None):
    """The ``files.Section`` of ``resource``. ``parse(entry, stored)`` gives an entry's values
    ({field: value}; ``stored``: the record of its name, or None) or raises ValidationError with
    lines naming the entry; ``exported`` ({field: function of the value}) writes a field its own way."""
    shape, name_field = resource.file, resource.name_field
    exported = exported or {}
    detail = {"detail": "jobs apply"} if shape.says_jobs_apply else {}
    pruned = {"detail": "jobs apply --prune"} if shape.says_jobs_apply else {}

    def written(name, value):
        if name in exported:
            return exported[name](value)
        return value.name if isinstance(value, Model) else value  # a record it names, by its name

    def export(actor):
        entries = []
        named = [name for name in shape.fields if resource.model._meta.get_field(name).is_relation]
        for obj in resource.visible(actor.user).select_related(*named).order_by(name_field):
            entry = {name: written(name, getattr(obj, name)) for name in shape.fields}
            entries.append({name: value for name, value in entry.items()
                            if name in shape.always or name == name_field or not empty(value)})
        return entries

    def plan(entries, actor, prune, earlier):
        existing = {getattr(obj, name_field): obj for obj in resource.visible(actor.user)}
        errors, changes, seen, unchanged = [], [], {}, 0
        for entry in entries:
            name = entry.data.get(name_field) if isinstance(entry.data, dict) else None
            if isinstance(name, str) and name in seen:
                errors.append(f"{entry.where}: duplicate {name_field}, already used by {shape.key}[{seen[name]}].")
                continue
            if isinstance(name, str):
                seen[name] = entry.index
            stored = existing.get(name) if isinstance(name, str) else None
            try:
                values = parse(entry, stored)
            except ValidationError as exc:
                errors += exc.messages
                continue
            if stored is None:
                changes.append(Change(entry, resource.model(**values), values))
                continue
            changed = [(key, getattr(stored, key), value) for key, value in values.items()
                       if getattr(stored, key) != value]
            if changed and not resource.may_edit(actor, stored):
                errors.append(f"{entry.where}: {resource.refused}")
            if changed:
                changes.append(Change(entry, stored, values, changed))
            else:
                unchanged += 1
        deletions = sorted((obj for name, obj in existing.items() if name not in seen and resource.may_edit(actor, obj)),
                           key=lambda obj: getattr(obj, name_field)) if prune else []
        return ResourcePlan(changes, deletions, unchanged, resource), errors

    def apply(plan, actor):
        errors = []
        for change in plan.changes:
            try:
                if change.is_new:
                    resource.create(actor, change.obj, **detail)
                else:
                    resource.edit(actor, change.obj, change.values, **detail)
            except ActionError as exc:
                errors += [f"{change.entry.where}: {line}" for line in files.messages_of(exc.fields)]
            except DatabaseError as exc:
                errors.append(f"{change.entry.where}: {str(exc).strip()}")
        return errors

    def delete(plan, actor):
        errors = []
        for obj in plan.deletions:
            try:
                resource.delete(actor, obj, **pruned)
            except ActionError as exc:
                errors.append(f"{shape.key}: - delete {plan.name(obj)}: {exc.message}")
        return errors

    return files.Section(shape.key, export=export, plan=plan, apply=apply, delete=delete)


def checked_by(serializer, defaults, fields, needs):
    """A ``parse`` whose entries are checked by the API's ``serializer`` (one set of messages), a
    field left out back to its default (``defaults``); a key not in ``fields`` is refused; ``needs``
    says what an entry must hold ("key and max_running")."""
    from rest_framework import serializers  # the shapes' library, loaded when a file is first read

    def parse_entry(entry, stored):
        data = entry.data
        if not isinstance(data, dict):
            raise ValidationError([f"{entry.where}: must be an object with {needs}."])
        unknown = [f"{entry.where}: unknown key '{name}'." for name in data if name not in fields]
        try:
            values = serializer(stored, data={**defaults, **data}).run_validation({**defaults, **data})
        except serializers.ValidationError as exc:
            lines = files.messages_of(serializers.as_serializer_error(exc))
            raise ValidationError(unknown + [f"{entry.where}: {line}" for line in lines]) from None
        if unknown:
            raise ValidationError(unknown)
        return values

    return parse_entry


def register(resource, parse, exported=None):
    files.register(section_of(resource, parse, exported), before=resource.file.before)
