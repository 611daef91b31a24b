"""The workflow form of the pages: make, change and delete a workflow, its jobs, their dependencies,
its schedule and its steps' parameter values, through the API's ``WorkflowSerializer`` and
``workflows.actions`` (``jobs.pages.resource_forms``). The jobs are typed one a line; the edges as
lines of ``upstream -> downstream``, with ``(skip)`` or ``(run)`` after one whose downstream does
otherwise than the workflow's policy when the upstream fails (as the audit trail writes them).
"Preview" checks the form as saving would and draws the graph (``graph.draw``) without saving."""

import json

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from jobs.pages.common import page, refused_is_forbidden
from jobs.pages.form_kit import NONE, FormField
from jobs.pages.job_forms import SCHEDULE_FIELDS, group_choices, make_field, schedule_object, strict_json
from jobs.pages.resource_forms import OTHER, ResourceForm, checked, deleted, form_view

from .. import actions, definitions
from ..models import FailurePolicy, Workflow
from ..permissions import may_act_on, visible_workflows
from ..resources import WORKFLOWS
from ..schemas import WorkflowSerializer
from . import graph

HELP = {
    "nodes": "The names of its jobs, one a line (jobs you can see).",
    "edges": "One a line: upstream -> downstream, the downstream job starting once its upstreams succeeded. "
             f"Add ({' or '.join(FailurePolicy.values)}) after a line for what that upstream's failure means, "
             "if not the workflow's policy.",
    "params": 'Values of the parameters of a step\'s job, by job name, as JSON: {"report": {"day": "2026-11-01"}}.',
}


def edges_text(edges):
    return "\n".join(f"{edge['from']} -> {edge['to']}" + (f" ({edge['on_failure']})" if edge.get("on_failure") else "")
                     for edge in edges)


def from_api(data):
    """The form's values of a workflow in the API's shape (``WorkflowSerializer(workflow).data``)."""
    schedule = data.get("schedule") or {"type": "manual"}
    values = {"name": data.get("name") or "", "description": data.get("description") or "",
              "enabled": data.get("enabled", True), "on_upstream_failure": data.get("on_upstream_failure") or "",
              "group": data.get("group") or "", "nodes": "\n".join(data.get("nodes") or []),
              "edges": edges_text(data.get("edges") or []),
              "params": json.dumps(data["params"], indent=2, ensure_ascii=False) if data.get("params") else "",
              "schedule_type": schedule["type"]}
    values.update({name: "" if value is None else str(value) for name, value in schedule.items() if name != "type"})
    return values


def from_post(post):
    values = {name: post.get(name, "") for name in post if name != "csrfmiddlewaretoken"}
    values["enabled"] = "enabled" in post
    return values


def to_api(values, workflow=None):
    """(the API's body of a workflow, {field: [messages]} of lines that are not an edge or JSON)."""
    edges, edge_errors = definitions.edges_of(values.get("edges", ""))
    data = {"name": values.get("name", ""), "description": values.get("description", ""),
            "enabled": values.get("enabled", False), "on_upstream_failure": values.get("on_upstream_failure", ""),
            "group": values.get("group") or None, "schedule": schedule_object(values),
            "nodes": [line.strip() for line in values.get("nodes", "").splitlines() if line.strip()], "edges": edges}
    if workflow is not None and data["group"] == (workflow.group.name if workflow.group_id else None):
        del data["group"]  # kept as it is: a group staff set is not a new choice of this user's
    errors = {"edges": edge_errors} if edge_errors else {}
    try:
        data["params"] = strict_json(values["params"]) if values.get("params", "").strip() else {}
    except ValueError as exc:
        errors["params"] = [f"Not JSON: {exc}."]
    return data, errors


def form_fields(request, values, errors):
    def made(name, label, widget, **more):
        return FormField(name, label, widget, values.get(name, ""), HELP.get(name, ""), errors.get(name, []), **more)

    policy = Workflow._meta.get_field("on_upstream_failure")
    return {
        "name": made("name", "Name", "text"),
        "description": made("description", "Description", "textarea", rows=2),
        "enabled": made("enabled", "Enabled (its schedule runs it)", "checkbox"),
        "nodes": made("nodes", "Jobs", "textarea", rows=6),
        "edges": made("edges", "Dependencies", "textarea", rows=6),
        "on_upstream_failure": made("on_upstream_failure", capfirst(policy.verbose_name), "select",
                                    choices=list(policy.choices)),
        "params": made("params", "Steps' parameter values", "textarea", rows=3),
        "group": made("group", "Group", "select", choices=[("", NONE), *group_choices(request.user,
                                                                                    values.get("group"))]),
    }


def answer(request, values, errors, workflow=None, preview=None):
    """The form; ``preview``: the graph drawn (else the stored one's)."""
    fields = form_fields(request, values, errors)
    schedule_errors = {**errors, "schedule_type": errors.get("schedule", [])}
    shown = {*fields, "schedule", *(name for names in SCHEDULE_FIELDS.values() for name in names)}
    if preview is None and workflow is not None:
        preview = graph.draw(*workflow.graph())
    context = {
        "workflow": workflow, "f": fields, "preview": preview,
        "schedule_field": make_field("schedule_type", values, schedule_errors, request),
        "schedules": [(value, [make_field(name, values, schedule_errors, request) for name in names])
                      for value, names in SCHEDULE_FIELDS.items() if names],
        "other_errors": [text for name, texts in errors.items() if name not in shown or name == OTHER
                         for text in texts],
    }
    response = page(request, "workflows/form.html", context, "workflows")
    response.status_code = 400 if errors else 200
    return response


def values_of(workflow):
    return from_api(WorkflowSerializer(workflow).data)


FORM = ResourceForm(WORKFLOWS, from_post, to_api, answer, lambda workflow: workflow.name, values_of,
                    actions.save_validated)


def workflow_form(request, workflow=None):
    """The form, saved as the API saves, or "Preview": the graph of what was typed drawn once the
    API's checks pass, nothing saved."""
    if "preview" not in request.POST:
        return form_view(request, FORM, workflow, lambda saved: reverse("workflow-pages:detail", args=[saved.pk]),
                         {"enabled": True, "on_upstream_failure": FailurePolicy.values[0], "schedule_type": "manual",
                          "timezone": "UTC"})
    values = from_post(request.POST)
    data, errors = to_api(values, workflow)
    validated, refused = checked(request, WORKFLOWS, {k: v for k, v in data.items() if k not in errors}, workflow)
    if errors or refused:
        return answer(request, values, {**(refused or {}), **errors}, workflow)
    names, edges, _ = validated["graph"]
    return answer(request, values, {}, workflow, preview=graph.draw(names, edges))


def editable_workflow(request, pk):
    """A workflow the user sees (404 otherwise) and may act on (403 otherwise)."""
    workflow = get_object_or_404(visible_workflows(request.user).select_related("crontab", "interval", "clocked",
                                                                                  "group"), pk=pk)
    if not may_act_on(request.user, workflow):
        raise actions.ActionError(actions.COMMAND_JOBS_DENIED, actions.ActionError.FORBIDDEN)
    return workflow


@login_required
@refused_is_forbidden
def workflow_new(request):
    return workflow_form(request)


@login_required
@refused_is_forbidden
def workflow_edit(request, pk):
    return workflow_form(request, editable_workflow(request, pk))


@login_required
@require_POST
@refused_is_forbidden
def workflow_delete(request, pk):
    workflow = editable_workflow(request, pk)
    return deleted(request, WORKFLOWS, workflow, workflow.name, reverse("workflow-pages:list"),
                   reverse("workflow-pages:edit", args=[pk]))

