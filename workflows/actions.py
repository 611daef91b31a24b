"""What a person does to a workflow, one function per action: create, change, restore a version,
delete, run now, pause, resume, and to a workflow run: cancel, re-run.

As jobs.actions (whose ``Actor`` and ``ActionError`` these take and raise): every interface calls
them (the API, the pages, the admin, ``manage.py workflows`` and ``jobs apply``); each checks the
command-job rule, makes the change and writes its audit entry (subject ``workflow``, named by the
workflow) in one transaction. Finding the workflow (and the 404) is the interface's part.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from audit import trail
from audit.models import Action, Subject
from jobs.actions import quotas
from jobs.actions.jobs import ActionError, may_run_command_jobs, record_version
from jobs.actions.permissions import guarded_kinds, visible_jobs
from jobs.actions.versions import History, restored
from jobs.definitions import jobs as job_definitions
from jobs.models import Job

from . import definitions, progress
from .models import Workflow
from .permissions import COMMAND_JOBS_DENIED, may_act_on


def _check(actor, workflow):
    """A workflow with a command job runs it: acting on one takes the right to run command jobs."""
    if actor.user is not None and not may_act_on(actor.user, workflow):
        raise ActionError(COMMAND_JOBS_DENIED, ActionError.FORBIDDEN)


def _check_graph(actor, graph):
    if graph is None or may_run_command_jobs(actor):
        return
    commands = sorted(Job.objects.filter(name__in=graph[0], kind__in=guarded_kinds()).values_list("name", flat=True))
    if commands:
        message = (f"Only users with the jobs.run_command_jobs permission may put command jobs in a workflow "
                   f"({', '.join(commands)}).")
        raise ActionError(message, ActionError.FORBIDDEN, fields={"nodes": [message]})


def _record(actor, workflow, action, changes=None, detail=""):
    trail.record_about(Subject.WORKFLOW, workflow.name, action, actor.source, actor_name=actor.name,
                       user=actor.user, address=actor.address, changes=changes, detail=detail)


def snapshot(workflow):
    """The workflow's defining fields as JSON values, for the entries' {field: [old, new]}."""
    nodes, edges = workflow.graph()
    return {
        "name": workflow.name, "description": workflow.description, "enabled": workflow.enabled,
        "on_upstream_failure": workflow.on_upstream_failure, "schedule": job_definitions.schedule_of(workflow),
        "nodes": sorted(nodes), "edges": sorted(f"{e.upstream} -> {e.downstream}" + (f" ({e.on_failure})"
                                                                                    if e.on_failure else "")
                                                for e in edges),
        "params": workflow.step_params if workflow.pk else {},
        "owner": workflow.owner.get_username() if workflow.owner_id else None,
        "group": workflow.group.name if workflow.group_id else None,
    }


def diff(before, after):
    before, after = before or {}, after or {}
    return {name: [before.get(name), after.get(name)] for name in {**before, **after}
            if before.get(name) != after.get(name)}


def _saved(workflow, schedule, graph):
    try:
        return definitions.save_workflow(workflow, schedule, graph)
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None


# --- defining workflows


def create(actor, workflow, schedule=None, graph=None):
    """Save a new workflow (``graph``: ``definitions.parse_graph``'s output); its owner is the actor
    unless one is given. It counts against their quotas, as jobs do (``jobs.actions.quotas``)."""
    _check_graph(actor, graph)
    quotas.check_interval(actor, schedule, noun="workflows")
    if workflow.owner_id is None and actor.user is not None:
        workflow.owner = actor.user
    with transaction.atomic():
        quotas.check_held(actor, Workflow, group=workflow.group)
        workflow.version = 1
        _saved(workflow, schedule, graph)
        after = snapshot(workflow)
        _record(actor, workflow, Action.CREATE, changes=diff(None, after))
        record_version(actor, workflow, after, None, created=True)
    return workflow


def change(actor, workflow, values=None, schedule=None, graph=None, detail=""):
    """Set ``values`` ({field: value}) on a saved workflow and save it with ``schedule`` and ``graph``
    when given; ``workflow`` may carry its changes already (the admin's form sets them). A change
    of anything is its next version (``detail``: what made it, in that and the audit entry)."""
    with transaction.atomic():
        stored = (Workflow.objects.select_for_update(of=("self",))
                  .select_related("crontab", "interval", "clocked", "owner", "group").get(pk=workflow.pk))
        _check(actor, stored)
        _check_graph(actor, graph)
        quotas.check_interval(actor, schedule, stored, noun="workflows")
        before = snapshot(stored)
        for name, value in (values or {}).items():
            setattr(workflow, name, value)
        if workflow.group_id != stored.group_id:
            quotas.check_team_held(actor, Workflow, workflow.group)
        if schedule is None:
            job_definitions.restart_if_reenabled(workflow, stored.enabled)
        workflow.version = stored.version  # as the locked row has it: ``workflow`` may be older
        _saved(workflow, schedule, graph)
        after = snapshot(workflow)
        if changes := diff(before, after):
            _record(actor, workflow, Action.CHANGE, changes=changes, detail=detail)
            record_version(actor, workflow, after, changes, detail)
    return workflow


RESTORED = ("name", "description", "on_upstream_failure")  # and the schedule and the graph


def restore(actor, workflow, version):
    """Make ``workflow`` what its ``version`` (a ``WorkflowVersion`` of it) was, a change audited as
    "restored version N": (the workflow, whether that made a version). Its owner, team and whether
    it is enabled stay as they are. A version whose graph is no longer valid (a job deleted or no
    longer the actor's, a parameter its job no longer takes) is refused as that change would be."""
    values = version.values
    names = values.get("nodes") or []
    jobs = Job.objects.all() if actor.user is None else visible_jobs(actor.user)
    edges, errors = definitions.edges_of("\n".join(values.get("edges") or []))
    try:
        if errors:
            raise ValidationError({"edges": errors})
        graph = definitions.parse_graph(names, edges, {job.name: job for job in jobs.filter(name__in=names)},
                                        values.get("params") or {})
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None
    fields = {name: values[name] for name in RESTORED if name in values}
    return restored(workflow, version, lambda schedule, detail: change(actor, workflow, fields, schedule, graph, detail),
                    job_definitions.schedule_of(workflow))


HISTORY = History("workflow", diff, restore)


def save_validated(actor, values, workflow=None):
    """Create (``workflow`` None) or change a workflow from ``WorkflowSerializer``'s validated data:
    the API's and the pages' one way from a checked request to ``create`` or ``change``."""
    values = dict(values)
    schedule, graph = values.pop("schedule", None), values.pop("graph", None)
    if workflow is None:
        return create(actor, Workflow(**values), schedule or {"type": "manual"}, graph)
    return change(actor, workflow, values, schedule, graph)


def delete(actor, workflow):
    _check(actor, workflow)
    with transaction.atomic():
        _record(actor, workflow, Action.DELETE, changes=diff(snapshot(workflow), None))
        workflow.delete()


# --- running workflows


def run_now(actor, workflow):
    """A manual run of the workflow: its steps without upstreams are queued at once."""
    _check(actor, workflow)
    with transaction.atomic():
        quotas.check_runs(actor, workflow.group)
        wf_run = progress.start(workflow, user=actor.user)
        _record(actor, workflow, Action.RUN_NOW, detail=f"workflow run #{wf_run.pk}")
    return wf_run


def pause(actor, workflow):
    return _switch(actor, workflow, definitions.pause, Action.PAUSE)


def resume(actor, workflow):
    return _switch(actor, workflow, definitions.resume, Action.RESUME)


def _switch(actor, workflow, switch, action):
    _check(actor, workflow)
    with transaction.atomic():
        switch(workflow)
        _record(actor, workflow, action)
    return workflow


def cancel(actor, wf_run):
    """Cancel a running workflow run; False (and no entry) when it had already ended."""
    _check(actor, wf_run.workflow)
    reason = f"Cancelled by {actor.name} from the {actor.interface}"
    with transaction.atomic():
        cancelled = progress.request_cancel(wf_run, reason)
        if cancelled:
            _record(actor, wf_run.workflow, Action.CANCEL, detail=f"workflow run #{wf_run.pk}")
    # The step runs are cancelled after that commits, one by one (progress.stop_steps says why).
    progress.stop_steps(wf_run, reason)
    return cancelled


def rerun(actor, wf_run):
    """A new workflow run that keeps the steps of ``wf_run`` that succeeded and runs the rest."""
    _check(actor, wf_run.workflow)
    with transaction.atomic():
        quotas.check_runs(actor, wf_run.workflow.group)
        try:
            new_run = progress.rerun(wf_run, user=actor.user)
        except progress.NotRerunnable as exc:
            raise ActionError(str(exc), ActionError.CONFLICT) from None
        _record(actor, wf_run.workflow, Action.RERUN, detail=f"workflow run #{new_run.pk} re-runs #{wf_run.pk}")
    return new_run
