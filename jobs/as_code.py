"""Jobs as code: every job as a YAML or JSON file (``manage.py jobs export``), and a file applied
back to the database (``manage.py jobs apply``).

A job in a file looks like a job in the API without what the service sets itself (id, owner,
next_run_at, last_run, created_at, updated_at). ``name``, ``kind``, ``target`` and ``schedule``
are always written; every other field is written only when it differs from the model's default,
so files stay short. Applying a file makes each job in it match the file: a field missing from
an entry is set back to its default.

A file may also hold ``workflows:`` next to ``jobs:``; ``workflows.as_code`` does their part.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime

import yaml
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import DatabaseError, transaction
from django.db.models import ProtectedError

from audit import trail
from audit.models import Source
from workflows import as_code as workflows_as_code

from . import definitions
from .models import Job

# The keys of a job in a file, in the order they are written (the API's order).
FIELDS = [
    "name", "description", "tags", "kind", "target", "args", "kwargs", "environment",
    "http_method", "http_headers", "http_body", "http_ok_statuses", "schedule",
    "catchup_policy", "catchup_max", "overlap_policy", "start_deadline_seconds", "jitter_seconds",
    "memory_limit_mb", "cpu_limit_seconds", "max_open_files", "max_processes", "working_directory",
    "enabled", "queue", "max_retries", "retry_backoff_seconds", "retry_backoff_max_seconds",
    "retry_jitter", "timeout_seconds", "sla_seconds", "retention_days", "retention_min_runs",
]
ALWAYS_WRITTEN = {"name", "kind", "target", "schedule"}
REQUIRED = {"name", "kind", "target"}
MODEL_FIELDS = [name for name in FIELDS if name != "schedule"]
JSON_TYPES = {"tags": list, "args": list, "kwargs": dict, "environment": dict, "http_headers": dict,
              "http_ok_statuses": list}
SCHEDULE_PARTS = {"cron", "timezone", "every_seconds", "run_at", "type"}


class JobFileError(Exception):
    """A file that cannot be applied; ``messages`` says where and why, one line each."""

    def __init__(self, messages):
        self.messages = list(messages)
        super().__init__("\n".join(self.messages))


def default_of(name):
    return Job._meta.get_field(name).get_default()


def sorted_value(value):
    """Nested objects with their keys sorted, so an export does not depend on storage order."""
    if isinstance(value, dict):
        return {key: sorted_value(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_value(item) for item in value]
    return value


# --- export

def job_entry(job):
    entry = {}
    for name in FIELDS:
        value = definitions.schedule_of(job) if name == "schedule" else getattr(job, name)
        if name in ALWAYS_WRITTEN or value != default_of(name):
            entry[name] = value if name == "schedule" else sorted_value(value)
    return entry


def export_text(fmt):
    """Every job, sorted by name, as ``fmt`` ("yaml" or "json")."""
    jobs = Job.objects.select_related("crontab", "interval", "clocked").order_by("name")
    document = {"jobs": [job_entry(job) for job in jobs]}
    if workflows := workflows_as_code.export_entries():
        document["workflows"] = workflows
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


# --- reading a file

@dataclass
class Entry:
    index: int
    data: dict
    line: int | None = None

    @property
    def where(self):
        name = self.data.get("name") if isinstance(self.data, dict) else None
        place = f"line {self.line}: " if self.line else ""
        return f"{place}jobs[{self.index}]" + (f" (name: {name})" if name else "")


class Entries(list):
    """The file's job entries; ``workflows`` holds its workflow entries, None without the key."""

    workflows = None


def read_entries(text, fmt):
    try:
        if fmt == "json":
            document, lines = json.loads(text), {}
        else:
            document, lines = yaml.safe_load(text), entry_lines(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise JobFileError([f"Cannot read the file: {exc}"]) from None
    if (not isinstance(document, dict) or "jobs" not in document or set(document) - {"jobs", "workflows"}
            or not isinstance(document["jobs"], list) or not isinstance(document.get("workflows", []), list)):
        extra = sorted(set(document) - {"jobs", "workflows"}) if isinstance(document, dict) else []
        hint = f" (unknown top-level keys: {', '.join(map(str, extra))})" if extra else ""
        raise JobFileError([f"The file must hold a key jobs with a list of jobs, and may hold a key workflows "
                            f"with a list of workflows{hint}."])
    entries = Entries(Entry(i, data, lines.get(i)) for i, data in enumerate(document["jobs"]))
    if "workflows" in document:
        workflow_lines = entry_lines(text, "workflows") if fmt != "json" else {}
        entries.workflows = [Entry(i, data, workflow_lines.get(i)) for i, data in enumerate(document["workflows"])]
    return entries


def entry_lines(text, key="jobs"):
    """The line number (from 1) where each entry of the ``key`` list starts."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return {}
    for name, value in root.value:
        if name.value == key and isinstance(value, yaml.SequenceNode):
            return {i: item.start_mark.line + 1 for i, item in enumerate(value.value)}
    return {}


# --- planning

@dataclass
class Change:
    entry: Entry
    job: Job
    values: dict
    schedule: dict | None  # the parsed schedule when it must be (re)applied
    changed: list = field(default_factory=list)  # (key, old, new) of an update

    @property
    def is_new(self):
        return self.job.pk is None


@dataclass
class Plan:
    changes: list
    deletions: list
    unchanged: int
    workflows: object = None  # a workflows.as_code.WorkflowPlan when the file has workflows

    @property
    def is_empty(self):
        return not self.changes and not self.deletions and (self.workflows is None or self.workflows.is_empty)

    def lines(self):
        out = []
        for change in self.changes:
            if change.is_new:
                out.append(f"+ create {change.job.name}")
            else:
                diffs = ", ".join(f"{key}: {show(old)} -> {show(new)}" for key, old, new in change.changed)
                out.append(f"~ update {change.job.name}: {diffs}")
        out += [f"- delete {job.name}" for job in self.deletions]
        out.append(f"= unchanged: {self.unchanged}")
        if self.workflows is not None:
            out += self.workflows.lines()
        return out


def show(value):
    return json.dumps(value, ensure_ascii=False, default=str)


def comparable_schedule(spec):
    if spec["type"] == "once" and not isinstance(spec["run_at"], datetime):
        return {**spec, "run_at": datetime.fromisoformat(spec["run_at"])}
    return spec


def shown_schedule(spec):
    return {**spec, "run_at": spec["run_at"].isoformat()} if spec["type"] == "once" else spec


def messages_of(exc, prefix_for=lambda key: key):
    if not hasattr(exc, "error_dict"):
        return exc.messages
    out = []
    for key, messages in exc.message_dict.items():
        label = "" if key == NON_FIELD_ERRORS else f"{prefix_for(key)}: "
        out += [f"{label}{message}" for message in messages]
    return out


def schedule_key(key):
    return f"schedule.{key}" if key in SCHEDULE_PARTS else key


def parse_entry(entry):
    """The entry's model values (defaults filled in) and parsed schedule; raises JobFileError."""
    data = entry.data
    if not isinstance(data, dict):
        raise JobFileError([f"{entry.where}: must be an object with name, kind, target and schedule."])
    errors = [f"{entry.where}: unknown key '{key}'." for key in data if key not in FIELDS]
    errors += [f"{entry.where}: {key}: Must not contain NUL (\\u0000) characters." for key, value in data.items()
               if key in MODEL_FIELDS and definitions.contains_nul(value)]
    errors += [f"{entry.where}: {key}: This field is required." for key in sorted(REQUIRED - set(data))]
    values = {}
    for name in MODEL_FIELDS:
        raw = data.get(name, default_of(name))
        try:
            if name in JSON_TYPES and not isinstance(raw, JSON_TYPES[name]):
                raise ValidationError(f"Must be a {'list' if JSON_TYPES[name] is list else 'mapping'}.")
            if name == "tags" and not all(isinstance(tag, str) for tag in raw):
                raise ValidationError("Must be a list of strings.")
            values[name] = Job._meta.get_field(name).to_python(raw)
        except ValidationError as exc:
            errors += [f"{entry.where}: {name}: {message}" for message in exc.messages]
    schedule = None
    try:
        schedule = definitions.parse_schedule(data.get("schedule", {"type": "manual"}))
    except ValidationError as exc:
        errors += [f"{entry.where}: {message}" for message in messages_of(exc, schedule_key)]
    if errors:
        raise JobFileError(errors)
    return values, schedule


def plan_changes(entries, prune=False):
    errors, changes, seen = [], [], {}
    existing = {job.name: job for job in Job.objects.select_related("crontab", "interval", "clocked")}
    unchanged = 0
    for entry in entries:
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        if isinstance(name, str) and name in seen:
            errors.append(f"{entry.where}: duplicate name, already used by jobs[{seen[name]}].")
            continue
        seen[name] = entry.index
        try:
            values, schedule = parse_entry(entry)
        except JobFileError as exc:
            errors += exc.messages
            continue
        name = values["name"]
        seen[name] = entry.index
        job = existing.get(name)
        if job is None:
            changes.append(Change(entry, Job(**values), values, schedule))
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
    deletions = sorted((job for n, job in existing.items() if n not in seen), key=lambda j: j.name) if prune else []
    workflow_plan = None
    if getattr(entries, "workflows", None) is not None:
        job_names = {name for name in existing if name in seen or not prune} | {n for n in seen if isinstance(n, str)}
        workflow_plan, workflow_errors = workflows_as_code.plan_workflows(entries.workflows, job_names, prune)
        errors += workflow_errors
    if errors:
        raise JobFileError(errors)
    return Plan(changes, deletions, unchanged, workflow_plan)


# --- applying

def apply_plan(plan, dry_run=False):
    """Save every change and delete the pruned jobs in one transaction: all of it or none.

    A dry run saves the changes too (that is the full validation) and then rolls back."""
    errors = []
    with transaction.atomic():
        for change in plan.changes:
            job = change.job
            was_enabled = job.enabled if not change.is_new else True
            is_new = change.is_new
            before = None if is_new else trail.snapshot(job)
            for key, value in change.values.items():
                setattr(job, key, value)
            if change.schedule is None:
                definitions.restart_if_reenabled(job, was_enabled)
            try:
                definitions.save_job(job, change.schedule)
                if changes := trail.diff(before, trail.snapshot(job)):
                    trail.record(job, "create" if is_new else "change", Source.CLI, changes=changes,
                                 detail="jobs apply")
            except ValidationError as exc:
                errors += [f"{change.entry.where}: {m}" for m in messages_of(exc, schedule_key)]
            except DatabaseError as exc:  # a value the model accepts and the database does not
                errors.append(f"{change.entry.where}: {str(exc).strip()}")
        if plan.workflows is not None:
            errors += workflows_as_code.apply_changes(plan.workflows)
            workflows_as_code.delete_pruned(plan.workflows)
        if errors:
            raise JobFileError(errors)
        for job in plan.deletions:
            trail.record(job, "delete", Source.CLI, changes=trail.diff(trail.snapshot(job), None),
                         detail="jobs apply --prune")
        try:
            Job.objects.filter(pk__in=[job.pk for job in plan.deletions]).delete()
        except ProtectedError as exc:
            raise JobFileError([f"jobs: cannot delete {node.job.name}: the workflow {node.workflow.name} uses it."
                                for node in exc.protected_objects]) from None
        if dry_run:
            transaction.set_rollback(True)
