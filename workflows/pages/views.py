"""The workflow pages: every workflow the user can see, and one workflow with its graph (nodes
coloured by the selected workflow run's steps), its run history, the run/re-run/cancel buttons and
its versions (``jobs.pages.versions``, with a restore). Another user's workflow answers 404, as in
the API."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from jobs.pages import versions
from jobs.pages.common import actor, page, refused_is_forbidden, too_many

from .. import actions, definitions
from ..permissions import may_act_on, visible_workflow_runs, visible_workflows
from . import graph

RUNS_PER_PAGE = 25


@login_required
def workflow_list(request):
    workflows = definitions.listed(visible_workflows(request.user))
    return page(request, "workflows/list.html", {"workflows": workflows}, "workflows")


@login_required
def workflow_detail(request, pk):
    workflow = get_object_or_404(visible_workflows(request.user).select_related("crontab", "interval", "clocked"),
                                 pk=pk)
    history = Paginator(workflow.runs.order_by("-created_at", "-id"), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    selected = None
    if request.GET.get("run", "").isdigit() and len(request.GET["run"]) < 19:  # within a bigint
        selected = workflow.runs.filter(pk=int(request.GET["run"])).first()
    selected = selected or workflow.runs.order_by("-created_at", "-id").first()
    steps = {}
    if selected:
        steps = {step.job.name: step for step in selected.steps.select_related("job", "run")}
    nodes, edges = workflow.graph()
    context = {
        "workflow": workflow, "history": history, "selected": selected,
        "steps": sorted(steps.values(), key=lambda s: s.pk), "edges": edges,
        "graph": graph.draw(nodes, edges, steps), "may_act": may_act_on(request.user, workflow),
        "step_params": sorted(workflow.step_params.items()),
        "gantt": graph.steps_timeline(selected, list(steps.values()), timezone.now()) if selected else "",
        "tzname": "UTC",
        **versions.context(workflow, request.GET, actions.HISTORY, "workflow-pages:version-restore"),
    }
    return page(request, "workflows/detail.html", context, "workflows")


@login_required
@require_POST
@refused_is_forbidden
def workflow_restore(request, pk, number):
    workflow = get_object_or_404(visible_workflows(request.user), pk=pk)
    return redirect(workflow_url(versions.restored(request, workflow, number, actions.HISTORY)))


def acting(action, request, *args):
    """``action`` (of workflows.actions) as the page's user; a refusal for want of the right is a 403."""
    try:
        return action(actor(request), *args)
    except actions.ActionError as exc:
        if exc.kind == actions.ActionError.FORBIDDEN:
            raise PermissionDenied(exc.message) from None
        raise


@login_required
@require_POST
def workflow_run_now(request, pk):
    workflow = get_object_or_404(visible_workflows(request.user), pk=pk)
    try:
        wf_run = acting(actions.run_now, request, workflow)
    except actions.ActionError as exc:
        if exc.kind != actions.ActionError.TOO_MANY:
            raise
        return too_many(request, exc)
    messages.success(request, f"Workflow run #{wf_run.pk} of {workflow.name} started.")
    return redirect(f"{workflow_url(workflow)}?run={wf_run.pk}")


def visible_workflow_run(request, pk):
    return get_object_or_404(visible_workflow_runs(request.user).select_related("workflow"), pk=pk)


@login_required
@require_POST
def workflow_rerun(request, pk):
    wf_run = visible_workflow_run(request, pk)
    workflow = wf_run.workflow
    try:
        new_run = acting(actions.rerun, request, wf_run)
    except actions.ActionError as exc:
        messages.error(request, exc.message)
        return redirect(f"{workflow_url(workflow)}?run={wf_run.pk}")
    messages.success(request, f"Workflow run #{new_run.pk} re-runs #{wf_run.pk} from its failed steps.")
    return redirect(f"{workflow_url(workflow)}?run={new_run.pk}")


@login_required
@require_POST
def workflow_cancel(request, pk):
    wf_run = visible_workflow_run(request, pk)
    workflow = wf_run.workflow
    if acting(actions.cancel, request, wf_run):
        messages.success(request, f"Workflow run #{wf_run.pk} is cancelled.")
    else:
        messages.info(request, f"Workflow run #{wf_run.pk} is already {wf_run.status}.")
    return redirect(f"{workflow_url(workflow)}?run={wf_run.pk}")


def workflow_url(workflow):
    from django.urls import reverse

    return reverse("workflow-pages:detail", args=[workflow.pk])
