"""Workflows, declared once (``jobs.resources.Resource``): served by the generic API
(``jobs.api.resources``, with their own calls: run, pause, resume, and their runs) and admin
(``jobs.admin.through_actions.ResourceAdmin``, with the graph to read). Their section of jobs files
is their own (``workflows.as_code``: a graph of jobs named in the same file)."""

from jobs.resources import Resource

from . import actions
from .models import Workflow
from .permissions import visible_workflows

WORKFLOWS = Resource(
    model=Workflow, noun="workflow", serializer="workflows.schemas.WorkflowSerializer", visible=visible_workflows,
    create=actions.create, edit=actions.change, delete=actions.delete,
    route="workflows", basename="workflow",
    filters={"name": (str, "Exact name."), "enabled": (bool, "")},
    api_docs={
        "list": "Workflows you own, of your groups (all of them for staff), by name.",
        "create": "Define a workflow from jobs you can see; you become its owner. A cycle in `edges` is a 400 naming "
                  "it (`cycle: a → b → a`).",
        "update": "Replace a workflow's fields; without `schedule`, `nodes` or `edges` those are kept.",
        "partial_update": "Change some fields; the graph is checked again as a whole.",
    },
    admin_list=("name", "enabled", "schedule_type", "next_run_at", "on_upstream_failure", "owner"),
    admin_search=("name",),
)
