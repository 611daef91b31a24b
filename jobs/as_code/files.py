"""Jobs as code: every job as a YAML or JSON file (``manage.py jobs export``), and a file applied
back to the database (``manage.py jobs apply``).

A file's top-level keys are *sections*, each registered with what exports, plans, saves and
deletes its entries. ``jobs:`` is the core's and is always there; an app adds its own key by
registering a ``Section`` in its ``AppConfig.ready`` (``workflows:`` does). Sections are planned
and saved in the order they were registered (a later one may use what an earlier one defines),
pruned in the reverse order, and applied all in one transaction.

A job in a file is a job of the API (``jobs.schemas.jobs.JobSerializer``, which validates it: one
schema and one set of messages) without what the service sets itself (id, owner, next_run_at,
last_run, created_at, updated_at). ``name``, ``kind``, ``target`` and ``schedule`` are always
written; every other field only when it differs from its default, so files stay short. Applying a file makes each job in it
match the file: a field missing from an entry is set back to its default. Errors name the entry,
the key and (YAML) the line: ``line 12: jobs[2] (name: nightly): schedule.cron: ...``.
"""

import contextvars
import copy
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import import_module

import yaml
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, transaction
from django.db.models import Model
from django.db.models.base import ModelState
from django.utils import timezone
from rest_framework.fields import SkipField
from rest_framework.serializers import ValidationError, as_serializer_error
from rest_framework.settings import api_settings
from rest_framework.validators import UniqueValidator

from .. import collector
from ..access import secrets
from ..actions import jobs as actions
from ..actions.permissions import visible_jobs
from ..definitions import jobs as definitions
from ..models import Job
from ..schemas.jobs import JobSerializer, field_errors
from . import SECTION_MODULES

ALWAYS_WRITTEN = {"name", "kind", "target", "schedule"}


class JobFileError(Exception):
    """A file that cannot be applied; ``messages`` says where and why, one line each."""

    def __init__(self, messages):
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))


# --- the sections of a file


@dataclass(frozen=True)
class Section:
    """One top-level key of a file. ``plan(entries, actor, prune, earlier)`` returns (plan, error
    lines), ``earlier`` being the plans of the sections registered before it, by key; the plan has
    ``lines()``, ``is_empty`` and ``counts()`` (created, updated, deleted). ``apply(plan, actor)``
    saves its changes and ``delete(plan, actor)`` its prunings, each returning error lines.
    ``export(actor)`` lists what the actor sees. A section of a user (``--as``, the API) touches
    only what that user sees, with that user's permissions."""

    key: str
    export: Callable
    plan: Callable
    apply: Callable
    delete: Callable
    required: bool = False  # the file must hold it; an export always writes it


SECTIONS = {}

# Where a long apply says how far it got (``manage.py jobs apply``: stderr); set by ``reporting``.
PROGRESS = contextvars.ContextVar("progress", default=None)
PROGRESS_EVERY = 10000


def report(done, total, what):
    """Say how far a long apply got: every PROGRESS_EVERY entries, and at the end of a long one."""
    out = PROGRESS.get()
    if out is not None and total >= PROGRESS_EVERY and (done % PROGRESS_EVERY == 0 or done == total):
        out(f"{what}: {done:,} of {total:,}")


def sections():
    """{key: Section} in order, the apps' section modules (``SECTION_MODULES``) imported first."""
    for name in SECTION_MODULES:
        import_module(name)
    return SECTIONS


def register(section, before=None):
    """Add ``section``, after those registered so far or ``before`` the section of that key (whose
    entries may then use what it defines: ``limits:`` comes before ``jobs:``)."""
    SECTIONS[section.key] = section
    if before in SECTIONS:
        ordered = [key for key in SECTIONS if key != section.key]
        ordered.insert(ordered.index(before), section.key)
        for key in ordered:
            SECTIONS[key] = SECTIONS.pop(key)


@dataclass
class Entry:
    key: str  # the section
    index: int
    data: dict
    line: int | None = None

    @property
    def where(self):
        name = self.data.get("name") if isinstance(self.data, dict) else None
        place = f"line {self.line}: " if self.line else ""
        return f"{place}{self.key}[{self.index}]" + (f" (name: {name})" if name else "")


@dataclass
class FilePlan:
    sections: dict  # key: the section's plan, for the keys the file holds

    @property
    def is_empty(self):
        return all(plan.is_empty for plan in self.sections.values())

    def lines(self):
        return [line for plan in self.sections.values() for line in plan.lines()]

    def counts(self):
        """(created, updated, deleted) over every section."""
        return tuple(map(sum, zip(*(plan.counts() for plan in self.sections.values()), strict=True)))


# --- export


def export_text(fmt, actor):
    """Every section's entries that ``actor`` sees, as ``fmt`` ("yaml" or "json"). Secret values
    are written masked: applied back, the mask keeps the stored value."""
    document = {}
    for key, section in sections().items():
        entries = section.export(actor)
        if entries or section.required:
            document[key] = entries
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(document, Dumper=FileDumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=100)


class FileDumper(yaml.SafeDumper):
    """Writes text of several lines (a description, a request body) as a ``|`` block."""


def represent_text(dumper, text):
    # PyYAML falls back to a quoted style by itself when a block cannot hold the text exactly.
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


FileDumper.add_representer(str, represent_text)


def format_of(path):
    if path == "-" or path.endswith((".yaml", ".yml")):
        return "yaml"
    if path.endswith(".json"):
        return "json"
    raise JobFileError([f"{path}: the file name must end in .yaml, .yml or .json (or be - for stdin/stdout)."])


# --- reading, planning and applying a file


def read_entries(text, fmt):
    """{section key: [Entry]} of the sections the file holds."""
    try:
        document, root = (json.loads(text), None) if fmt == "json" else load_yaml(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise JobFileError([f"Cannot read the file: {exc}"]) from None
    except RecursionError:
        raise JobFileError(["Cannot read the file: it nests values too deeply."]) from None
    known = sections()
    if (not isinstance(document, dict) or set(document) - set(known)
            or any(key not in document for key, section in known.items() if section.required)
            or not all(isinstance(value, list) for value in document.values())):
        raise JobFileError([shape_error(document)])
    return {key: [Entry(key, i, data, line) for (i, data), line in
                  zip(enumerate(document[key]), entry_lines(root, key, len(document[key])), strict=True)]
            for key in known if key in document}


YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Deeper than any job, workflow or channel needs; libyaml builds nodes recursively, and a document
# of 200 KB of "[" nested deep enough crashed the process.
MAX_DEPTH = 100


def load_yaml(text):
    """(document, its root node): parsed once (the node gives each entry's line), with libyaml when
    PyYAML has it (some 10× faster than its Python parser on a file of many jobs), after
    ``check_yaml``: the one YAML reader of every section."""
    check_yaml(text)
    loader = YAML_LOADER(text)
    try:
        root = loader.get_single_node()
        return (loader.construct_document(root) if root is not None else None), root
    finally:
        loader.dispose()


def check_yaml(text):
    """Refuse, before anything is built, an alias (``*name``: a 500-byte document of aliases of
    aliases expands to hundreds of millions of values) and nesting deeper than MAX_DEPTH. One
    pass over the parser's events, a few percent of the load; it stops at the first problem."""
    loader = YAML_LOADER(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                raise JobFileError([
                    f"line {event.start_mark.line + 1}: the alias *{event.anchor} is not accepted: write the value "
                    "out in full (anchors and aliases are refused: a few of them can make a short file expand to "
                    "gigabytes)."])
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise JobFileError([f"line {event.start_mark.line + 1}: values nest deeper than {MAX_DEPTH} "
                                        "levels; this file is not accepted."])
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        raise JobFileError([f"Cannot read the file: {exc}"]) from None
    finally:
        loader.dispose()


def shape_error(document):
    known = sections()
    required = [key for key, section in known.items() if section.required]
    optional = [key for key, section in known.items() if not section.required]
    extra = sorted(map(str, set(document) - set(known))) if isinstance(document, dict) else []
    return (f"The file must hold the key {', '.join(required)} with a list"
            + (f", and may hold {', '.join(optional)} with a list" if optional else "")
            + (f" (unknown top-level keys: {', '.join(extra)})" if extra else "") + ".")


def entry_lines(root, key, count):
    """The line number (from 1) where each entry of the ``key`` list starts; None without YAML."""
    if isinstance(root, yaml.MappingNode):
        for name, value in root.value:
            if name.value == key and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return [None] * count


@collector.paused()
def plan_file(entries, actor, prune=False):
    """The plan of every section the file holds; raises JobFileError with every error found."""
    plans, errors = {}, []
    for key, section in sections().items():
        if key in entries:
            plans[key], section_errors = section.plan(entries[key], actor, prune, dict(plans))
            errors += section_errors
    if errors:
        raise JobFileError(errors)
    return FilePlan(plans)


@collector.paused()
def apply_plan(plan, actor, dry_run=False):
    """Save every section's changes, then delete what is pruned (dependents first), in one
    transaction: all of it or none. A dry run saves too (that is the full validation) and then
    rolls back."""
    known = sections()
    with transaction.atomic():
        errors = [line for key, section_plan in plan.sections.items()
                  for line in known[key].apply(section_plan, actor)]
        if not errors:
            errors = [line for key, section_plan in reversed(plan.sections.items())
                      for line in known[key].delete(section_plan, actor)]
        if errors:
            raise JobFileError(errors)
        if dry_run:
            transaction.set_rollback(True)


def messages_of(errors, prefix=""):
    """DRF's nested errors as "key.part: message" lines ("message" alone when not about a key)."""
    lines = []
    for key, value in errors.items():
        label = "" if key in (api_settings.NON_FIELD_ERRORS_KEY, NON_FIELD_ERRORS) else f"{prefix}{key}"
        if isinstance(value, dict):
            lines += messages_of(value, f"{label}.")
        else:
            lines += [f"{label}: {message}" if label else str(message) for message in value]
    return lines


def show(value):
    return json.dumps(value, ensure_ascii=False, default=str)


# --- the jobs section


def file_fields():
    """{key: serializer field} of a job in a file: the API's writable fields, in the API's order."""
    return {name: f for name, f in JobSerializer().fields.items() if not f.read_only}


def default_of(name):
    return {"type": "manual"} if name == "schedule" else Job._meta.get_field(name).get_default()


def sorted_value(value):
    """Nested objects with their keys sorted, so an export does not depend on storage order."""
    if isinstance(value, dict):
        return {key: sorted_value(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_value(item) for item in value]
    return value


def jobs_of(actor):
    return Job.objects.all() if actor.user is None else visible_jobs(actor.user)


def export_jobs(actor):
    keys = file_fields()
    jobs = jobs_of(actor).select_related("crontab", "interval", "clocked", "group", "owner", "last_run").order_by("name")
    entries = []
    for job in jobs:
        data = JobSerializer(job).data
        entries.append({name: sorted_value(data[name]) for name in keys
                        if name in ALWAYS_WRITTEN or data[name] != default_of(name)})
    return entries


@dataclass
class Change:
    entry: Entry
    job: Job
    values: dict
    schedule: dict | None  # the parsed schedule when it must be (re)applied
    changed: list = field(default_factory=list)  # (key, old, new) of an update

    def __post_init__(self):
        self.is_new = self.job.pk is None  # as planned: the counts are read after the save too


@dataclass
class Plan:
    """What applying a section would create, update and delete; each section says how its lines read."""
    changes: list
    deletions: list
    unchanged: int

    @property
    def is_empty(self):
        return not self.changes and not self.deletions

    def counts(self):
        created = sum(change.is_new for change in self.changes)
        return created, len(self.changes) - created, len(self.deletions)

    def lines(self):
        out = [self.created(change) if change.is_new else self.updated(change) for change in self.changes]
        out += [self.deleted(obj) for obj in self.deletions]
        out.append(self.unchanged_line())
        return out


@dataclass
class JobPlan(Plan):
    names_after: set  # the names of the jobs there will be once the plan is applied

    def created(self, change):
        return f"+ create {change.job.name}"

    def updated(self, change):
        diffs = ", ".join(f"{key}: {show(shown_value(key, old))} -> {show(shown_value(key, new))}"
                          for key, old, new in change.changed)
        return f"~ update {change.job.name}: {diffs}"

    def deleted(self, job):
        return f"- delete {job.name}"

    def unchanged_line(self):
        return f"= unchanged: {self.unchanged}"


def shown_value(key, value):
    """A value for the plan: a secret one never in clear (stored values are tokens, new ones sealed)."""
    if key in secrets.FIELDS:
        return dict.fromkeys(value or {}, secrets.MASK)
    if isinstance(value, Model):  # a group: by its name, as a file gives it
        return str(value)
    return value


def comparable_schedule(spec):
    if spec["type"] == "once" and not isinstance(spec["run_at"], datetime):
        return {**spec, "run_at": datetime.fromisoformat(spec["run_at"])}
    return spec


def shown_schedule(spec):
    return {**spec, "run_at": spec["run_at"].isoformat()} if spec["type"] == "once" else spec


def memo(function):
    """``function(data)`` once per distinct ``data`` (a text, or an object of plain values) within an apply, a refusal included: a
    schedule object that 10,000 jobs share is checked once."""
    found = {}

    def call(data):
        try:  # a schedule's values are plain: a tuple of them is a key (and much cheaper than JSON)
            key = (type(data), tuple(sorted((k, type(v), v) for k, v in data.items()))  # true is not 1 here
                   if isinstance(data, dict) else data)
            hash(key)
        except TypeError:
            return function(data)
        if key not in found:
            try:
                found[key] = (True, function(data))
            except ValidationError as exc:
                found[key] = (False, exc.detail)
        ok, result = found[key]
        if not ok:
            raise ValidationError(result)
        return {**result} if isinstance(result, dict) else result

    return call


def value_key(name, value):
    """A key of ``value`` (read from JSON or YAML) that tells apart what a check tells apart (true
    and 1, 1 and 1.0, the order of an object's keys); None for a value that has none."""
    if value is None or isinstance(value, (str, int, float)):
        return name, type(value), value
    try:
        return name, type(value), json.dumps(value)
    except (TypeError, ValueError):  # a YAML date, say: checked each time
        return None


class EntryChecker:
    """The API's serializer (``JobSerializer``: one schema and one set of messages) over every entry
    of a file. A serializer per set of keys the entries give, reused, holding only those fields (a
    key left out is set to its default, which is valid; ``queue`` is always checked, it depends on
    the user); a schedule, a group or a queue that many entries share is checked once; and the
    names' uniqueness is the plan's, in one query (``taken``)."""

    def __init__(self, actor):
        self.actor = actor
        self.fields = file_fields()
        self.required = [name for name, f in self.fields.items() if f.required]
        self.defaults = {name: default_of(name) for name, f in self.fields.items() if not f.required}
        self.defaults_but_schedule = {name: value for name, value in self.defaults.items() if name != "schedule"}
        fields = JobSerializer().fields
        unique = [v for v in fields["name"].validators if isinstance(v, UniqueValidator)]
        self.taken_message = unique[0].message if unique else "A job with this name already exists."
        # Neither depends on the serializer it is bound to: one memo serves them all.
        self.memos = {name: memo(fields[name].to_internal_value) for name in ("schedule", "group")}
        self.queues, self.instance, self.serializers, self.checked = {}, None, {}, {}
        self.seen, self.distinct, self.unshared = Counter(), Counter(), set()

    def serializer_for(self, keys):
        if keys not in self.serializers:
            serializer = JobSerializer(None, partial=True, context={"actor": self.actor})
            fields = serializer.fields
            for name in list(fields):
                if name not in keys:
                    del fields[name]
            if "name" in fields:
                fields["name"].validators = [v for v in fields["name"].validators if not isinstance(v, UniqueValidator)]
            for name, function in self.memos.items():
                if name in fields:
                    fields[name].to_internal_value = function
            serializer.validate_queue = self.queue_check(serializer.validate_queue)
            self.serializers[keys] = serializer
        return self.serializers[keys]

    def queue_check(self, check):
        def call(queue):
            stored = self.instance.queue if self.instance is not None else None
            if queue == stored:
                return queue
            if queue not in self.queues:
                try:
                    self.queues[queue] = (True, check(queue))
                except ValidationError as exc:
                    self.queues[queue] = (False, exc.detail)
            ok, result = self.queues[queue]
            if not ok:
                raise ValidationError(result)
            return result

        return call

    def validated(self, serializer, data):
        """``serializer.run_validation(data)`` with each field's check (its ``run_validation`` and
        ``validate_<name>``) done once per distinct value: 100,000 entries hold a few hundred distinct
        values of most keys. None when anything refuses. ``queue`` is checked each time (its check
        depends on the job), as is ``validate``, where the stored values are known."""
        found = {}
        for f in serializer._writable_fields:
            primitive = f.get_value(data)
            name = f.field_name
            key = value_key(name, primitive) if name != "queue" and name not in self.unshared else None
            checked = self.checked.get(key) if key is not None else None
            if key is not None:
                self.seen[name] += 1
                self.distinct[name] += checked is None
                if self.distinct[name] > 1000 and self.distinct[name] * 2 > self.seen[name]:
                    self.unshared.add(name)  # a value of its own per job (a name): keeping them is waste
            if checked is None:
                method = getattr(serializer, "validate_" + f.field_name, None)
                try:
                    value = f.run_validation(primitive)
                    value = method(value) if method is not None else value
                except (ValidationError, DjangoValidationError, SkipField):
                    return None
                checked = (value, value is primitive)
                if key is not None:
                    self.checked[key] = checked
            value, is_given = checked
            # The entry's own value when the check kept it (nothing shared between two jobs), else
            # a copy of a container (a schedule: the keys it sets).
            serializer.set_value(found, f.source_attrs, primitive if is_given else
                                 {**value} if isinstance(value, dict) else copy.deepcopy(value) if isinstance(value, list)
                                 else value)
        try:
            serializer.run_validators(found)
            return serializer.validate(found)
        except (ValidationError, DjangoValidationError):
            return None

    def check(self, entry, job):
        """The entry's values, every key of the file set (those left out at their default)."""
        data = entry.data
        if not isinstance(data, dict):
            raise JobFileError([f"{entry.where}: must be an object with name, kind, target and schedule."])
        errors = [f"{entry.where}: unknown key '{key}'." for key in data if key not in self.fields]
        missing = {key: [self.fields[key].error_messages["required"]] for key in self.required if key not in data}
        serializer = self.serializer_for(frozenset(data) | {"queue"})
        serializer.instance = self.instance = job
        given = {"queue": self.defaults["queue"], **data}
        values, problems = (None if errors or missing else self.validated(serializer, given)), {}
        if values is None:  # refused: the serializer's own run says why, in its words
            try:
                values = serializer.run_validation(given)
            except ValidationError as exc:
                values, problems = None, as_serializer_error(exc)
        problems = {**missing, **problems}
        if problems or errors:
            ordered = {key: problems[key] for key in (*self.fields, *problems) if key in problems}
            raise JobFileError(errors + [f"{entry.where}: {line}" for line in messages_of(ordered)])
        schedule = values.pop("schedule", {"type": "manual"})
        return {**self.defaults_but_schedule, **values, "schedule": schedule}


class NewJobs:
    """``Job(**values)`` for many new jobs: a copy of one job made with the defaults, the values
    set on it (``Model.__init__`` over the job's sixty fields was a tenth of applying a file)."""

    def __init__(self):
        self.template = Job().__dict__
        fields = Job._meta.concrete_fields
        self.fresh = [f for f in fields if callable(f.default)]  # a list or dict of its own per job
        self.relations = {f.name for f in fields if f.is_relation}

    def __call__(self, values):
        job = Job.__new__(Job)
        job.__dict__.update(self.template)
        job._state = ModelState()
        for f in self.fresh:
            if f.name not in values:
                job.__dict__[f.attname] = f.get_default()
        for name, value in values.items():
            if name in self.relations:
                setattr(job, name, value)
            else:
                job.__dict__[name] = value
        return job


def plan_jobs(entries, actor, prune, earlier):
    checker, new_job = EntryChecker(actor), NewJobs()
    errors, changes, seen, unchanged = [], [], {}, 0
    # Prefetched, not joined: the few thousand schedule rows and groups are read once and shared, not
    # built again for each of 100,000 jobs.
    existing = {job.name: job for job in jobs_of(actor).prefetch_related("crontab", "interval", "clocked", "group")}
    for done, entry in enumerate(entries, 1):
        report(done, len(entries), "jobs checked")
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        name = name if isinstance(name, str) else None
        if name in seen:
            errors.append(f"{entry.where}: duplicate name, already used by jobs[{seen[name]}].")
            continue
        if name is not None:
            seen[name] = entry.index
        try:
            values = checker.check(entry, existing.get(name))
        except JobFileError as exc:
            errors += exc.messages
            continue
        schedule = values.pop("schedule")
        job = existing.get(values["name"])
        if job is None:
            changes.append(Change(entry, new_job(values), values, schedule))
            continue
        changed = [(key, getattr(job, key), value) for key, value in values.items() if getattr(job, key) != value]
        current = definitions.schedule_of(job)
        if comparable_schedule(current) != comparable_schedule(schedule):
            changed.append(("schedule", current, shown_schedule(schedule)))
        else:
            schedule = None  # re-applying it would move next_run_at
        if changed:
            changes.append(Change(entry, job, values, schedule, changed))
        else:
            unchanged += 1
    if actor.user is not None:  # a name taken by a job the user does not see
        new = [change for change in changes if change.is_new]
        taken = set()
        for start in range(0, len(new), 10000):
            taken.update(Job.objects.filter(name__in=[c.job.name for c in new[start:start + 10000]])
                         .values_list("name", flat=True))
        errors += [f"{c.entry.where}: name: {checker.taken_message}" for c in new if c.job.name in taken]
        changes = [c for c in changes if not (c.is_new and c.job.name in taken)]
    deletions = sorted((job for n, job in existing.items() if n not in seen), key=lambda j: j.name) if prune else []
    names_after = set(seen) | (set(existing) - {job.name for job in deletions})
    return JobPlan(changes, deletions, unchanged, names_after), errors


SAVE_CHUNK = 10000
# What the serializer checks as the model would (its fields are built from the model's), and the
# owner (the acting user): the model checks only the rest when the jobs are saved.
CHECKED_BY_THE_SERIALIZER = [name for name in JobSerializer.Meta.fields if name != "schedule"]


def apply_jobs(plan, actor):
    """Save the changes in bulk (``actions.save_many``), 10,000 jobs at a time; when the database
    refuses a value the model accepts, the one-by-one path finds which job's and says so."""
    try:
        with transaction.atomic():
            return save_in_bulk(plan, actor)
    except DatabaseError:
        pass
    for change in plan.changes:  # rolled back: what the bulk insert gave the new jobs is no more
        if change.is_new:
            change.job.pk, change.job._state.adding = None, True
    with transaction.atomic():
        return save_one_by_one(plan, actor)


def save_in_bulk(plan, actor):
    # One moment for every chunk: the file is applied in one transaction, and the chunks' jobs of
    # one schedule then share its first slot, computed once (definitions.ScheduleRows).
    errors, total, now = [], len(plan.changes), timezone.now()
    for start in range(0, total, SAVE_CHUNK):
        chunk = plan.changes[start:start + SAVE_CHUNK]
        new = [change for change in chunk if change.is_new]
        changed = [change for change in chunk if not change.is_new]
        refused = actions.save_many(actor, [(c.job, c.schedule) for c in new],
                                    [(c.job, {key: c.values[key] for key, *_ in c.changed if key in c.values},
                                      c.schedule) for c in changed],  # the other values are the stored ones
                                    checked_fields=CHECKED_BY_THE_SERIALIZER, detail="jobs apply", now=now)
        for (which, index), exc in sorted(refused.items(), key=lambda item: (item[0][0] != "new", item[0][1])):
            change = (new if which == "new" else changed)[index]
            errors += [f"{change.entry.where}: {line}" for line in messages_of(field_errors(DjangoValidationError(exc.fields)))]
        report(start + len(chunk), total, "jobs saved")
    return errors


def save_one_by_one(plan, actor):
    errors = []
    for change in plan.changes:
        try:
            if change.is_new:
                actions.create(actor, change.job, change.schedule, detail="jobs apply")
            else:
                actions.edit(actor, change.job, change.values, change.schedule, detail="jobs apply")
        except actions.ActionError as exc:
            fields = field_errors(DjangoValidationError(exc.fields))
            errors += [f"{change.entry.where}: {line}" for line in messages_of(fields)]
        except DatabaseError as exc:  # a value the model accepts and the database does not
            errors.append(f"{change.entry.where}: {str(exc).strip()}")
    return errors


def delete_jobs(plan, actor):
    refused = actions.delete_many(actor, plan.deletions, detail="jobs apply --prune")
    return [f"jobs: - delete {plan.deletions[i].name}: {exc.message}" for i, exc in sorted(refused.items())]


register(Section("jobs", export=export_jobs, plan=plan_jobs, apply=apply_jobs, delete=delete_jobs, required=True))
