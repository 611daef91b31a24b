"""Workflows in a jobs-as-code file: the ``workflows:`` list next to ``jobs:``.

A workflow in a file is its API shape without what the service sets (id, owner, next_run_at…):
``name``, ``nodes`` (job names), ``edges`` ({from, to, on_failure?}) and ``schedule`` are always
written, ``description``, ``enabled`` and ``on_upstream_failure`` when not the default. Nodes may
name jobs defined in the same file. ``jobs.as_code`` reads, plans and applies the file; this
module does the workflows' part of each step.
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError

from jobs import definitions as job_definitions

from . import definitions
from .models import FailurePolicy, Workflow

FIELDS = ["name", "description", "enabled", "on_upstream_failure", "schedule", "nodes", "edges"]
ALWAYS_WRITTEN = {"name", "schedule", "nodes", "edges"}
DEFAULTS = {"description": "", "enabled": True, "on_upstream_failure": FailurePolicy.SKIP}
SCHEDULE_PARTS = {"cron", "timezone", "every_seconds", "run_at", "type"}


def workflow_entry(workflow):
    nodes, edges = definitions.graph_of(workflow)
    entry = {"name": workflow.name}
    for name in ("description", "enabled", "on_upstream_failure"):
        if getattr(workflow, name) != DEFAULTS[name]:
            entry[name] = str(getattr(workflow, name)) if name == "on_upstream_failure" else getattr(workflow, name)
    entry["schedule"] = job_definitions.schedule_of(workflow)
    entry["nodes"] = nodes
    entry["edges"] = [edge.as_dict() for edge in edges]
    return {key: entry[key] for key in FIELDS if key in entry}


def export_entries():
    workflows = Workflow.objects.select_related("crontab", "interval", "clocked").order_by("name")
    return [workflow_entry(workflow) for workflow in workflows]


@dataclass
class Change:
    entry: object  # jobs.as_code.Entry
    workflow: Workflow
    values: dict
    schedule: dict | None
    graph: tuple
    changed: list = field(default_factory=list)

    @property
    def is_new(self):
        return self.workflow.pk is None


@dataclass
class WorkflowPlan:
    changes: list
    deletions: list
    unchanged: int

    @property
    def is_empty(self):
        return not self.changes and not self.deletions

    def lines(self):
        out = []
        for change in self.changes:
            if change.is_new:
                out.append(f"+ create workflow {change.workflow.name}")
            else:
                out.append(f"~ update workflow {change.workflow.name}: {', '.join(k for k, *_ in change.changed)}")
        out += [f"- delete workflow {workflow.name}" for workflow in self.deletions]
        out.append(f"= unchanged workflows: {self.unchanged}")
        return out


def where(entry):
    return entry.where.replace("jobs[", "workflows[", 1)


def parse_entry(entry, job_names):
    """(model values, parsed schedule, parsed graph) of a workflow entry; raises ValidationError
    with messages that name the entry and the key."""
    data = entry.data
    here = where(entry)
    if not isinstance(data, dict):
        raise ValidationError([f"{here}: must be an object with name, nodes, edges and schedule."])
    errors = [f"{here}: unknown key '{key}'." for key in data if key not in FIELDS]
    errors += [f"{here}: {key}: This field is required." for key in ("name", "nodes") if key not in data]
    values = {name: data.get(name, DEFAULTS[name]) for name in DEFAULTS}
    values["name"] = data.get("name")
    if not isinstance(values["name"], str) or not values["name"] or len(values["name"]) > 200:
        errors.append(f"{here}: name: Must be a text of 1 to 200 characters.")
    if not isinstance(values["description"], str):
        errors.append(f"{here}: description: Must be a text.")
    if not isinstance(values["enabled"], bool):
        errors.append(f"{here}: enabled: Must be true or false.")
    if values["on_upstream_failure"] not in FailurePolicy.values:
        errors.append(f"{here}: on_upstream_failure: Must be one of {', '.join(FailurePolicy.values)}.")
    if job_definitions.contains_nul([values["name"], values["description"], data.get("nodes"), data.get("edges")]):
        errors.append(f"{here}: Must not contain NUL (\\u0000) characters.")
    schedule = graph = None
    try:
        schedule = job_definitions.parse_schedule(data.get("schedule", {"type": "manual"}))
    except ValidationError as exc:
        errors += [f"{here}: {schedule_key(key)}: {m}" for key, ms in exc.message_dict.items() for m in ms]
    if "nodes" in data:
        try:
            graph = definitions.parse_graph(data["nodes"], data.get("edges", []), job_names)
        except ValidationError as exc:
            errors += [f"{here}: {key}: {m}" for key, ms in exc.message_dict.items() for m in ms]
    if errors:
        raise ValidationError(errors)
    return values, schedule, graph


def schedule_key(key):
    return f"schedule.{key}" if key in SCHEDULE_PARTS else key


def plan_workflows(entries, job_names, prune=False):
    """``job_names``: the names of the jobs there will be once the file's jobs are applied."""
    errors, changes, seen, unchanged = [], [], {}, 0
    existing = {w.name: w for w in Workflow.objects.select_related("crontab", "interval", "clocked")}
    names = dict.fromkeys(job_names, True)
    for entry in entries:
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        if isinstance(name, str) and name in seen:
            errors.append(f"{where(entry)}: duplicate name, already used by workflows[{seen[name]}].")
            continue
        seen[name] = entry.index
        try:
            values, schedule, graph = parse_entry(entry, names)
        except ValidationError as exc:
            errors += exc.messages
            continue
        workflow = existing.get(values["name"])
        if workflow is None:
            changes.append(Change(entry, Workflow(**values), values, schedule, graph))
            continue
        changed = [(key, getattr(workflow, key), value) for key, value in values.items()
                   if getattr(workflow, key) != value]
        current_nodes, current_edges = definitions.graph_of(workflow)
        if (current_nodes, set(current_edges)) != (graph[0], set(graph[1])):
            changed.append(("graph", None, None))
        else:
            graph = None
        if job_definitions.schedule_of(workflow) != shown(schedule):
            changed.append(("schedule", None, None))
        else:
            schedule = None  # re-applying it would move next_run_at
        if changed:
            changes.append(Change(entry, workflow, values, schedule, graph, changed))
        else:
            unchanged += 1
    if errors:
        return None, errors
    deletions = sorted((w for n, w in existing.items() if n not in seen), key=lambda w: w.name) if prune else []
    return WorkflowPlan(changes, deletions, unchanged), []


def shown(schedule):
    return {**schedule, "run_at": schedule["run_at"].isoformat()} if schedule["type"] == "once" else schedule


def delete_pruned(plan):
    Workflow.objects.filter(pk__in=[w.pk for w in plan.deletions]).delete()


def apply_changes(plan):
    """Save every change; returns the error messages (the caller rolls back when there are any)."""
    errors = []
    for change in plan.changes:
        workflow = change.workflow
        was_enabled = workflow.enabled if not change.is_new else True
        for key, value in change.values.items():
            setattr(workflow, key, value)
        if change.schedule is None:
            job_definitions.restart_if_reenabled(workflow, was_enabled)
        try:
            definitions.save_workflow(workflow, change.schedule, change.graph)
        except ValidationError as exc:
            errors += [f"{where(change.entry)}: {m}" for m in exc.messages]
        except DatabaseError as exc:
            errors.append(f"{where(change.entry)}: {str(exc).strip()}")
    return errors
