"""Workflows in a jobs-as-code file: the ``workflows:`` list next to ``jobs:``.

A workflow in a file is its API shape without what the service sets (id, owner, next_run_at…):
``name``, ``nodes`` (job names), ``edges`` ({from, to, on_failure?}) and ``schedule`` are always
written, ``description``, ``enabled`` and ``on_upstream_failure`` when not the default. Nodes may
name jobs defined in the same file. ``jobs.as_code`` reads, plans and applies the file; this
module is the ``workflows`` section of it (named in ``WorkflowsConfig.ready``), planned after
the jobs and pruned before them.
"""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError

from jobs.actions.permissions import COMMAND_JOBS_DENIED, guarded_kinds, may_run_command_jobs
from jobs.as_code import files
from jobs.as_code.files import Plan
from jobs.definitions import jobs as job_definitions
from jobs.models import Job

from . import actions, definitions
from .models import FailurePolicy, Workflow
from .permissions import visible_workflows

FIELDS = ["name", "description", "enabled", "on_upstream_failure", "schedule", "nodes", "edges", "params"]
ALWAYS_WRITTEN = {"name", "schedule", "nodes", "edges"}
DEFAULTS = {"description": "", "enabled": True, "on_upstream_failure": FailurePolicy.SKIP}
SCHEDULE_PARTS = {"cron", "timezone", "every_seconds", "run_at", "type"}


def workflow_entry(workflow):
    nodes, edges = workflow.graph()
    entry = {"name": workflow.name}
    for name in ("description", "enabled", "on_upstream_failure"):
        if getattr(workflow, name) != DEFAULTS[name]:
            entry[name] = str(getattr(workflow, name)) if name == "on_upstream_failure" else getattr(workflow, name)
    entry["schedule"] = job_definitions.schedule_of(workflow)
    entry["nodes"] = nodes
    entry["edges"] = [edge.as_dict() for edge in edges]
    if step_params := workflow.step_params:
        entry["params"] = step_params
    return {key: entry[key] for key in FIELDS if key in entry}


def export_entries(actor):
    """The workflows ``actor`` sees (on the command line without ``--as``: every one)."""
    found = Workflow.objects if actor.user is None else visible_workflows(actor.user)
    workflows = found.select_related("crontab", "interval", "clocked").order_by("name")
    return [workflow_entry(workflow) for workflow in workflows]


@dataclass
class Change:
    entry: object  # jobs.as_code.files.Entry
    workflow: Workflow
    values: dict
    schedule: dict | None
    graph: tuple
    changed: list = field(default_factory=list)

    def __post_init__(self):
        self.is_new = self.workflow.pk is None  # as planned: the counts are read after the save too


@dataclass
class WorkflowPlan(Plan):
    def created(self, change):
        return f"+ create workflow {change.workflow.name}"

    def updated(self, change):
        return f"~ update workflow {change.workflow.name}: {', '.join(k for k, *_ in change.changed)}"

    def deleted(self, workflow):
        return f"- delete workflow {workflow.name}"

    def unchanged_line(self):
        return f"= unchanged workflows: {self.unchanged}"


def parse_entry(entry, job_names):
    """(model values, parsed schedule, parsed graph) of a workflow entry; raises ValidationError
    with messages that name the entry and the key."""
    data = entry.data
    here = entry.where
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
            graph = definitions.parse_graph(data["nodes"], data.get("edges", []), job_names, data.get("params"))
        except ValidationError as exc:
            errors += [f"{here}: {key}: {m}" for key, ms in exc.message_dict.items() for m in ms]
    if errors:
        raise ValidationError(errors)
    return values, schedule, graph


def schedule_key(key):
    return f"schedule.{key}" if key in SCHEDULE_PARTS else key


def plan_workflows(entries, actor, prune, earlier):
    """The section's plan and its errors; nodes may name the jobs there will be once the file's
    jobs are applied (``earlier["jobs"]``)."""
    job_names = earlier["jobs"].names_after
    errors, changes, seen, unchanged = [], [], {}, 0
    existing = {w.name: w for w in Workflow.objects.select_related("crontab", "interval", "clocked")}
    names = dict.fromkeys(job_names, True)
    # The jobs whose parameters a workflow gives values: checked against their saved declarations.
    given = {name for entry in entries if isinstance(entry.data, dict) and isinstance(entry.data.get("params"), dict)
             for name in entry.data["params"] if isinstance(name, str)}
    names.update({job.name: job for job in Job.objects.filter(name__in=given & set(job_names)).only("name", "parameters")})
    for entry in entries:
        name = entry.data.get("name") if isinstance(entry.data, dict) else None
        if isinstance(name, str) and name in seen:
            errors.append(f"{entry.where}: duplicate name, already used by workflows[{seen[name]}].")
            continue
        if isinstance(name, str):
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
        current_nodes, current_edges = workflow.graph()
        if (current_nodes, set(current_edges), workflow.step_params) != (graph[0], set(graph[1]), graph[2]):
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
    deletions = sorted((w for n, w in existing.items() if n not in seen), key=lambda w: w.name) if prune else []
    plan = WorkflowPlan(changes, deletions, unchanged)
    if actor.user is not None:
        errors += refusals_for(actor.user, plan)
    return plan, errors


def refusals_for(user, plan):
    """What ``user`` may not do in ``plan``: touch a workflow they do not see, or one with a command
    job without the right to run command jobs."""
    visible = set(visible_workflows(user).values_list("pk", flat=True))
    out = []
    for workflow, label in [(c.workflow, c.entry.where) for c in plan.changes] + [
            (w, f"workflows: {w.name}") for w in plan.deletions]:
        if workflow.pk is not None and workflow.pk not in visible:
            out.append(f"{label}: name: a workflow of this name exists and is not yours to change.")
    if not may_run_command_jobs(user):
        command_jobs = set(Job.objects.filter(kind__in=guarded_kinds()).values_list("name", flat=True))
        for change in plan.changes:
            nodes = change.graph[0] if change.graph else change.workflow.graph()[0]
            if names := sorted(set(nodes) & command_jobs):
                out.append(f"{change.entry.where}: nodes: {', '.join(names)} are command jobs. {COMMAND_JOBS_DENIED}")
    return out


def shown(schedule):
    return {**schedule, "run_at": schedule["run_at"].isoformat()} if schedule["type"] == "once" else schedule


def delete_pruned(plan, actor):
    """Delete the workflows the file no longer has, each with its audit entry."""
    errors = []
    for workflow in plan.deletions:
        try:
            actions.delete(actor, workflow)
        except actions.ActionError as exc:
            errors.append(f"workflows: {workflow.name}: {exc.message}")
    return errors


def apply_changes(plan, actor):
    """Save every change, each with its audit entry; returns the error messages (the caller rolls
    back when there are any)."""
    errors = []
    for change in plan.changes:
        try:
            if change.is_new:
                actions.create(actor, change.workflow, change.schedule, change.graph)
            else:
                actions.change(actor, change.workflow, change.values, change.schedule, change.graph)
        except actions.ActionError as exc:
            errors += [f"{change.entry.where}: {m}" for messages in exc.fields.values() for m in messages]
        except DatabaseError as exc:
            errors.append(f"{change.entry.where}: {str(exc).strip()}")
    return errors


files.register(files.Section("workflows", export=export_entries, plan=plan_workflows, apply=apply_changes,
                             delete=delete_pruned))
