"""Who sees which workflows: as with jobs, a user sees the workflows they own and those of their
groups, staff see all; a workflow run follows its workflow. Anything else answers 404."""

from jobs.actions.permissions import following, guarded_kinds, may_run_command_jobs, owned_or_shared

from .models import Workflow, WorkflowRun

COMMAND_JOBS_DENIED = ("This workflow has command jobs: only users with the jobs.run_command_jobs "
                       "permission may change, delete, run, pause, resume, re-run or cancel it.")


def visible_workflows(user):
    return owned_or_shared(Workflow.objects.all(), user)


def visible_workflow_runs(user):
    return following(WorkflowRun.objects.all(), "workflow", visible_workflows, user)


def may_act_on(user, workflow):
    """Running a workflow runs its jobs: one with a command job needs the right to manage command
    jobs, as running that job alone would."""
    if may_run_command_jobs(user):
        return True
    return not workflow.nodes.filter(job__kind__in=guarded_kinds()).exists()
