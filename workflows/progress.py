"""The life of a workflow run: start it, start each step when its upstreams are done, end it.

Every decision about a workflow run is taken while its row is locked (SELECT … FOR UPDATE), in
the same transaction as the change that prompted it: a step's run reaching a terminal state
(``run_ended``, which hears every end of a run from jobs.lifecycle's events), a start, a cancel. Two upstreams finishing
at once on two workers therefore decide one after the other, and the second sees the first's
step as done; the step's own move from ``waiting`` to ``active`` is a conditional UPDATE besides.

Each step is an ordinary ``JobRun`` (trigger ``workflow``): retries, timeouts, lost-run detection
and republishing are the job's own, and a workflow run waits for them.
"""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import lifecycle, parameters
from jobs.actions.permissions import visible_jobs
from jobs.models import JobRun, RunStatus, RunTrigger

from .models import (
    STEP_TERMINAL,
    FailurePolicy,
    StepStatus,
    Workflow,
    WorkflowRun,
    WorkflowRunStatus,
    WorkflowStep,
    WorkflowTrigger,
)

STEP_STATUS_OF_RUN = {
    RunStatus.SUCCEEDED: StepStatus.SUCCEEDED,
    RunStatus.FAILED: StepStatus.FAILED,
    RunStatus.TIMED_OUT: StepStatus.FAILED,
    RunStatus.LOST: StepStatus.FAILED,
    RunStatus.SKIPPED: StepStatus.FAILED,
    RunStatus.CANCELLED: StepStatus.CANCELLED,
}


class NotRerunnable(Exception):
    pass


def start(workflow, trigger=WorkflowTrigger.MANUAL, user=None, scheduled_for=None, rerun_of=None):
    """Create a workflow run with a step per node and start the steps that have no upstream.

    Returns the run, or None when a scheduled slot already has one (another scheduler made it)."""
    now = timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                wf_run = WorkflowRun.objects.create(
                    workflow=workflow, trigger=trigger, scheduled_for=scheduled_for or now, triggered_by=user,
                    rerun_of=rerun_of, created_at=now, workflow_version=version_now(workflow))
        except IntegrityError:
            return None
        kept = {}
        if rerun_of is not None:
            kept = {step.node_id: step for step in rerun_of.steps.filter(status=StepStatus.SUCCEEDED)}
        WorkflowStep.objects.bulk_create([
            WorkflowStep(workflow_run=wf_run, node=node, job_id=node.job_id,
                         **({"status": StepStatus.SUCCEEDED, "run_id": kept[node.pk].run_id, "kept": True,
                             "started_at": kept[node.pk].started_at, "finished_at": kept[node.pk].finished_at,
                             "reason": f"kept from workflow run #{rerun_of.pk}"}
                            if node.pk in kept else {}))
            for node in workflow.nodes.all()
        ])
        WorkflowRun.objects.select_for_update().get(pk=wf_run.pk)
        advance(wf_run)
    wf_run.refresh_from_db()
    return wf_run


def version_now(workflow):
    """The workflow's version as committed (the steps are made from its nodes as they are now, not
    as the caller read it); None before versions were kept."""
    return Workflow.objects.filter(pk=workflow.pk).values_list("version", flat=True).first() or None


def rerun(wf_run, user=None):
    """A new workflow run that keeps the steps that succeeded in ``wf_run`` and runs the rest: the
    failed step(s) and everything downstream of them. ``wf_run`` itself stays as it ended."""
    if wf_run.status not in (WorkflowRunStatus.FAILED, WorkflowRunStatus.CANCELLED):
        raise NotRerunnable(f"Only a failed or cancelled workflow run can be re-run; this one is {wf_run.status}.")
    if WorkflowRun.objects.filter(rerun_of=wf_run).exists():
        raise NotRerunnable(f"Workflow run #{wf_run.pk} was already re-run as #{wf_run.rerun.pk}; re-run that one.")
    new_run = start(wf_run.workflow, WorkflowTrigger.RERUN, user=user, rerun_of=wf_run)
    if new_run is None:  # two re-runs at once: rerun_of is unique, the other one won
        raise NotRerunnable(f"Workflow run #{wf_run.pk} was already re-run.")
    return new_run


def on_run_event(event, run=None, **details):
    """Subscribed to the end of every run (jobs.lifecycle.events), in the transaction that ended it."""
    run_ended(run)


def run_ended(run):
    """``run`` (a JobRun or its id) has just reached a terminal state, in the caller's transaction.
    Records the step's outcome and starts whatever that makes ready."""
    if isinstance(run, JobRun) and run.trigger != RunTrigger.WORKFLOW:
        return  # not a step: spare every other run's end a query
    run_id = getattr(run, "pk", run)
    step = WorkflowStep.objects.filter(run_id=run_id, status=StepStatus.ACTIVE).only("pk", "workflow_run_id").first()
    if step is None:
        return
    wf_run = WorkflowRun.objects.select_for_update().get(pk=step.workflow_run_id)
    status, reason, error = JobRun.objects.filter(pk=run_id).values_list("status", "reason", "error").get()
    if status != RunStatus.SUCCEEDED:
        reason = reason or (error.strip().splitlines() or [""])[-1]
    WorkflowStep.objects.filter(pk=step.pk, status=StepStatus.ACTIVE).update(
        status=STEP_STATUS_OF_RUN.get(status, StepStatus.FAILED), finished_at=timezone.now(),
        reason=(reason or "")[:255])
    advance(wf_run)


def cancel(wf_run, user=None, reason=""):
    """Cancel a running workflow run: no new step starts, active step runs are cancelled.
    Returns whether this call cancelled it."""
    reason = reason or (f"Cancelled by {user.get_username()}" if user else "Cancelled")
    with transaction.atomic():
        moved = request_cancel(wf_run, reason)
    stop_steps(wf_run, reason)
    return moved


def request_cancel(wf_run, reason):
    """The first half of ``cancel``, in the caller's transaction (which commits before
    ``stop_steps``): mark a running workflow run cancelled. Returns whether this call did."""
    return bool(WorkflowRun.objects.filter(pk=wf_run.pk, status=WorkflowRunStatus.RUNNING, cancel_requested=False)
                .update(cancel_requested=True, reason=reason[:255]))


def stop_steps(wf_run, reason):
    """The second half of ``cancel``: cancel the active step runs and end the workflow run."""
    # The run rows are locked before the workflow run's by every hook (the run ends, then the hook
    # locks the workflow run); cancelling them one by one, outside a workflow-run lock, keeps that order.
    for run in JobRun.objects.filter(workflow_steps__workflow_run=wf_run, workflow_steps__status=StepStatus.ACTIVE):
        lifecycle.cancel(run, reason=f"workflow run #{wf_run.pk}: {reason}")
    with transaction.atomic():
        locked = WorkflowRun.objects.select_for_update().get(pk=wf_run.pk)
        if not locked.is_terminal:
            advance(locked)
    wf_run.refresh_from_db()


def advance(wf_run):
    """Start the waiting steps whose upstreams are all done, skip those an upstream failure rules
    out, and end the workflow run when no step is left to run. The caller holds the row lock."""
    wf_run = WorkflowRun.objects.select_related("workflow__owner", "triggered_by").get(pk=wf_run.pk)
    if wf_run.is_terminal:
        return
    workflow = wf_run.workflow
    steps = {step.node_id: step for step in wf_run.steps.select_related("job", "node")}
    upstreams = {node_id: [] for node_id in steps}
    for edge in workflow.edges.all():
        if edge.downstream_id in upstreams and edge.upstream_id in steps:
            upstreams[edge.downstream_id].append((edge.upstream_id, edge.policy(workflow)))
    now = timezone.now()
    changed = True
    while changed:  # a skip can make further steps ready (or skipped) in turn
        changed = False
        for node_id, step in steps.items():
            if step.status != StepStatus.WAITING:
                continue
            ups = upstreams[node_id]
            if any(steps[up].status not in STEP_TERMINAL for up, _ in ups):
                continue
            blocked = [steps[up] for up, policy in ups
                       if steps[up].status != StepStatus.SUCCEEDED and policy == FailurePolicy.SKIP]
            if wf_run.cancel_requested:
                changed |= _finish_step(step, StepStatus.CANCELLED, f"workflow run cancelled: {wf_run.reason}", now)
            elif blocked:
                reason = "; ".join(f"upstream {up.job.name} {up.status}" for up in blocked)
                changed |= _finish_step(step, StepStatus.SKIPPED, reason, now)
            else:
                changed |= _start_step(step, wf_run, now)
    if all(step.status in STEP_TERMINAL for step in steps.values()):
        _finish(wf_run, steps.values(), now)


def _finish_step(step, status, reason, now):
    moved = WorkflowStep.objects.filter(pk=step.pk, status=StepStatus.WAITING).update(
        status=status, reason=reason[:255], finished_at=now)
    step.status = status
    return bool(moved)


def _start_step(step, wf_run, now):
    if refused := _out_of_sight(step, wf_run):
        return _finish_step(step, StepStatus.SKIPPED, refused, now)
    try:
        values = parameters.resolve(step.job.parameters, step.node.params)
    except ValidationError as exc:  # the job's parameters changed since the workflow was saved
        problems = "; ".join(" ".join(texts) for texts in exc.message_dict.values())
        return _finish_step(step, StepStatus.SKIPPED, f"its params no longer fit the job's parameters: {problems}",
                            now)
    try:
        with transaction.atomic():
            run = create_step_run(step, wf_run, now, values)
            if not WorkflowStep.objects.filter(pk=step.pk, status=StepStatus.WAITING).update(
                    status=StepStatus.ACTIVE, run=run, started_at=now):
                raise AlreadyStarted  # rolls the run (and its publishing) back
    except AlreadyStarted:
        return False
    step.status, step.run = StepStatus.ACTIVE, run
    return True


def _out_of_sight(step, wf_run):
    """Why the step's job may not run for this workflow run, or None: its owner and the user who
    started it must still be active and see the job as each step starts (they may have left the
    job's group, or the job been moved to another, since the workflow was saved or started)."""
    for user in {wf_run.workflow.owner, wf_run.triggered_by} - {None}:
        if not user.is_active:
            return f"{user.get_username()}, for whom it runs, is no longer active"
        if not visible_jobs(user).filter(pk=step.job_id).exists():
            return f"{user.get_username()}, for whom it runs, may no longer see the job {step.job.name}"
    return None


class AlreadyStarted(Exception):
    pass


def create_step_run(step, wf_run, now, params=None):
    """A queued run of the step's job for this workflow run, with the step's values of its
    parameters (resolved), published on commit. In a re-run it keeps the idempotency key of the
    step's run in the workflow run re-run (or the one before)."""
    return lifecycle.create_run(step.job, RunTrigger.WORKFLOW, user=wf_run.triggered_by,
                                key_slot=rerun_key_slot(step, wf_run), params=params)


def rerun_key_slot(step, wf_run):
    """The slot whose key a re-run step keeps: that of the step's first run in the workflow runs
    this one re-runs; None when it is no re-run, or the step never ran before."""
    earlier = wf_run.rerun_of_id
    while earlier is not None:
        before = (WorkflowStep.objects.filter(workflow_run_id=earlier, node_id=step.node_id, run__isnull=False)
                  .values_list("run__key_slot", "run__scheduled_for").first())
        if before is not None:
            return before[0] or before[1]
        earlier = WorkflowRun.objects.filter(pk=earlier).values_list("rerun_of_id", flat=True).first()
    return None


def _finish(wf_run, steps, now):
    statuses = {step.status for step in steps}
    if wf_run.cancel_requested:
        status = WorkflowRunStatus.CANCELLED
    elif statuses <= {StepStatus.SUCCEEDED}:
        status = WorkflowRunStatus.SUCCEEDED
    else:
        status = WorkflowRunStatus.FAILED
    failed = sorted(step.job.name for step in steps if step.status in (StepStatus.FAILED, StepStatus.CANCELLED))
    reason = wf_run.reason or (f"failed: {', '.join(failed)}" if failed else "")
    WorkflowRun.objects.filter(pk=wf_run.pk, status=WorkflowRunStatus.RUNNING).update(
        status=status, finished_at=now, reason=reason[:255])
