"""Defining workflows: the graph as nodes (job names) and edges, checked for cycles, and saved.

The API and ``jobs apply`` both come through ``save_workflow``; errors are a Django
ValidationError keyed by field (``nodes``, ``edges``, ``schedule``…), cycles named in full.
"""

import re
from graphlib import CycleError, TopologicalSorter

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, OuterRef, Subquery

from jobs import parameters
from jobs.definitions import jobs as job_definitions
from jobs.kinds import running_elsewhere
from jobs.models import Job

from .models import Edge, FailurePolicy, WorkflowEdge, WorkflowNode, WorkflowRun

MAX_NODES = 200
# An edge as a line (the pages' form, a version's and the audit trail's values): a -> b, or a -> b (run).
EDGE = re.compile(r"\s*(?P<from>.+?)\s*->\s*(?P<to>.+?)\s*(?:\(\s*(?P<on_failure>[a-z_]*)\s*\))?\s*")


def parse_graph(nodes, edges, jobs_by_name, params=None):
    """Check ``nodes`` (a list of job names), ``edges`` (a list of {"from", "to", "on_failure"?}) and
    ``params`` ({job name: {parameter: value}}, the values each step's runs are given) against the
    jobs that may be used (``jobs_by_name``); returns (job names, [Edge], {job name: values})."""
    errors = {}
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
        errors["nodes"] = ["Must be a non-empty list of job names."]
        raise ValidationError(errors)
    if len(nodes) > MAX_NODES:
        errors["nodes"] = [f"At most {MAX_NODES} jobs in one workflow."]
    duplicates = sorted({n for n in nodes if nodes.count(n) > 1})
    unknown = [n for n in nodes if n not in jobs_by_name]
    node_errors = [f"'{n}' is listed more than once." for n in duplicates]
    node_errors += [f"No job named '{n}' that you may use." for n in unknown]
    elsewhere = running_elsewhere()
    node_errors += [f"'{n}' runs elsewhere (a {jobs_by_name[n].kind} job): a workflow cannot run it."
                    for n in nodes if getattr(jobs_by_name.get(n), "kind", None) in elsewhere]
    if node_errors:
        errors["nodes"] = node_errors
    parsed, edge_errors = [], []
    if not isinstance(edges, list):
        edge_errors.append("Must be a list of {\"from\": job, \"to\": job} objects.")
        edges = []
    for i, edge in enumerate(edges):
        if not isinstance(edge, dict) or not {"from", "to"} <= set(edge) or set(edge) - {"from", "to", "on_failure"}:
            edge_errors.append(f"edges[{i}]: must be an object with 'from', 'to' and optionally 'on_failure'.")
            continue
        upstream, downstream, policy = edge["from"], edge["to"], edge.get("on_failure") or ""
        if not isinstance(upstream, str) or not isinstance(downstream, str):
            edge_errors.append(f"edges[{i}]: 'from' and 'to' are job names.")
            continue
        missing = [n for n in (upstream, downstream) if n not in nodes]
        if missing:
            edge_errors.append(f"edges[{i}]: '{missing[0]}' is not one of the workflow's nodes.")
        elif upstream == downstream:
            edge_errors.append(f"cycle: {upstream} → {upstream}")
        elif policy not in ("", *FailurePolicy.values):
            edge_errors.append(f"edges[{i}]: on_failure must be one of {', '.join(FailurePolicy.values)}.")
        elif any(e.upstream == upstream and e.downstream == downstream for e in parsed):
            edge_errors.append(f"edges[{i}]: {upstream} → {downstream} is listed more than once.")
        else:
            parsed.append(Edge(upstream, downstream, policy))
    if not edge_errors and (cycle := find_cycle(nodes, parsed)):
        edge_errors.append("cycle: " + " → ".join(cycle))
    if edge_errors:
        errors["edges"] = edge_errors
    step_params, param_errors = parse_step_params(params, nodes, jobs_by_name)
    if param_errors:
        errors["params"] = param_errors
    if errors:
        raise ValidationError(errors)
    return nodes, parsed, step_params


def parse_step_params(params, nodes, jobs_by_name):
    """({job name: values}, [errors]) of a workflow's ``params``: each step's values checked against
    its job's parameters as a run of it would be (the defaults fill the rest when the step starts;
    only the values given are kept)."""
    if params in (None, {}):
        return {}, []
    if not isinstance(params, dict):
        return {}, ["Must be an object of job names to {parameter: value} objects."]
    found, errors = {}, []
    for name, values in params.items():
        if name not in nodes or name not in jobs_by_name:
            errors.append(f"'{name}' is not one of the workflow's nodes.")
            continue
        if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
            errors.append(f"{name}: Must be an object of parameter names to values.")
            continue
        job = jobs_by_name[name]
        if not isinstance(job, Job):  # a job a file creates along with the workflow: checked when the step starts
            if values:
                found[name] = values
            continue
        try:
            resolved = parameters.resolve(job.parameters, values)
        except ValidationError as exc:
            errors += [f"{name}: {key}: {' '.join(texts)}" for key, texts in exc.message_dict.items()]
            continue
        if given := {key: resolved[key] for key in values if key in resolved}:
            found[name] = given
    return found, errors


def edges_of(text):
    """([{"from", "to", "on_failure"?}], [messages]) of the edges' lines."""
    found, errors = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if not (match := EDGE.fullmatch(line)):
            errors.append(f"Line {number}: write it as 'upstream -> downstream', not '{line.strip()[:200]}'.")
            continue
        found.append({key: value for key, value in match.groupdict().items() if value})
    return found, errors


def find_cycle(nodes, edges):
    """A cycle as [a, b, …, a] following the edges' direction, or None."""
    graph = {name: set() for name in nodes}
    for edge in edges:
        graph[edge.downstream].add(edge.upstream)
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        # graphlib lists each node before the one that depends on it: upstream → downstream. The
        # cycle is told from its node listed first in the workflow, so the message is stable.
        cycle = list(exc.args[1])[:-1]
        start = min(range(len(cycle)), key=lambda i: nodes.index(cycle[i]))
        cycle = cycle[start:] + cycle[:start]
        return [*cycle, cycle[0]]
    return None


def layers(nodes, edges):
    """Nodes by topological depth: [[roots], [their direct downstreams], …], names sorted in a layer."""
    depth = {}
    graph = {name: {e.upstream for e in edges if e.downstream == name} for name in nodes}
    for name in TopologicalSorter(graph).static_order():
        depth[name] = 1 + max((depth[up] for up in graph[name]), default=-1)
    out = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in sorted(depth):
        out[depth[name]].append(name)
    return out


def save_workflow(workflow, schedule=None, graph=None):
    """Validate and save ``workflow``; apply ``schedule`` (a schedule object) and ``graph`` (the
    output of ``parse_graph``) when given. Nodes whose job stays keep their run history."""
    with transaction.atomic():
        if schedule is not None:
            job_definitions.apply_schedule(workflow, schedule)
        workflow.full_clean(exclude=["crontab", "interval", "clocked"])
        workflow.save()
        if graph is not None:
            names, edges, step_params = graph
            jobs = graph_jobs(names)
            existing = {node.job_id: node for node in workflow.nodes.all()}
            wanted = [jobs[name].pk for name in names]
            workflow.nodes.exclude(job_id__in=wanted).delete()
            for name in names:
                job_id, values = jobs[name].pk, step_values(jobs[name], step_params.get(name, {}))
                if job_id not in existing:
                    existing[job_id] = WorkflowNode.objects.create(workflow=workflow, job_id=job_id, params=values)
                elif existing[job_id].params != values:
                    WorkflowNode.objects.filter(pk=existing[job_id].pk).update(params=values)
            workflow.edges.all().delete()
            WorkflowEdge.objects.bulk_create([
                WorkflowEdge(workflow=workflow, upstream=existing[jobs[e.upstream].pk],
                             downstream=existing[jobs[e.downstream].pk], on_failure=e.on_failure)
                for e in edges
            ])
    return workflow


def step_values(job, values):
    """A step's values coerced by its job's declaration (a file may define the job along with the
    workflow: its values are checked again here, once it is saved); only the values given are kept."""
    if not values:
        return {}
    try:
        resolved = parameters.resolve(job.parameters, values)
    except ValidationError as exc:
        raise ValidationError({"params": [f"{job.name}: {key}: {' '.join(texts)}"
                                          for key, texts in exc.message_dict.items()]}) from None
    return {key: resolved[key] for key in values if key in resolved}


def graph_jobs(names):
    return {job.name: job for job in Job.objects.filter(name__in=names)}


pause, resume = job_definitions.pause, job_definitions.resume


def listed(workflows):
    """The workflows of the queryset, each with ``node_count`` and ``last`` (its newest run), in
    two queries: what the list page and ``manage.py workflows list`` show."""
    latest = WorkflowRun.objects.filter(workflow=OuterRef("pk")).order_by("-created_at", "-id")
    workflows = list(workflows.select_related("crontab", "interval", "clocked").annotate(
        node_count=Count("nodes", distinct=True), last_id=Subquery(latest.values("pk")[:1])))
    last_runs = WorkflowRun.objects.in_bulk([w.last_id for w in workflows if w.last_id])
    for workflow in workflows:
        workflow.last = last_runs.get(workflow.last_id)
    return workflows
