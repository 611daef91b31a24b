"""manage.py workflows [--as USER] list | show NAME | run NAME [--wait] | pause NAME | resume NAME
| rerun ID [--wait] | cancel ID

Workflows are defined with the API or ``manage.py jobs apply`` (``workflows:`` in the file). Each
action goes through ``workflows.actions`` (which writes its audit entry) as the operator, or with
``--as USER`` as that user (their workflows only, with their permissions)."""


from django.core.management.base import BaseCommand, CommandError

from jobs.management.commands.jobs import (
    EXIT_FAILED,
    act,
    first_or_error,
    resolve_user,
    table,
    wait_until_ended,
    when,
)
from workflows import actions, definitions
from workflows.models import Workflow, WorkflowRun, WorkflowRunStatus
from workflows.permissions import visible_workflow_runs, visible_workflows


def find_workflow(name, user=None):
    workflows = visible_workflows(user) if user else Workflow.objects
    return first_or_error(workflows.select_related("crontab", "interval", "clocked").filter(name=name),
                          f"No workflow named {name!r}. See `manage.py workflows list` for the names.")


def find_run(run_id, user=None):
    runs = visible_workflow_runs(user) if user else WorkflowRun.objects
    return first_or_error(runs.select_related("workflow").filter(pk=run_id), f"No workflow run {run_id}.")


class Command(BaseCommand):
    help = "List and show workflows; run, pause and resume them; re-run and cancel workflow runs."

    def add_arguments(self, parser):
        parser.add_argument("--as", dest="acting_user", metavar="USER",
                            help="Act as this user: their workflows only, with their permissions (default: the "
                                 "operator, who sees every workflow).")
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("list", help="All workflows with their schedule, next run and last run.")
        sub.add_parser("show", help="One workflow: its graph and its last runs with their steps.").add_argument("name")
        for action, arg, text in (("run", "name", "Start a run of a workflow now."),
                                  ("rerun", "id", "Re-run a failed or cancelled workflow run from its failed steps.")):
            parser_ = sub.add_parser(action, help=text)
            parser_.add_argument(arg, type=int if arg == "id" else str)
            parser_.add_argument("--wait", action="store_true",
                                 help="Wait for the workflow run to end; exit 0 if it succeeded, 1 if not, 2 on timeout.")
            parser_.add_argument("--timeout", type=float, default=3600.0, help="Seconds to wait with --wait.")
        sub.add_parser("pause", help="Stop a workflow's schedule.").add_argument("name")
        sub.add_parser("resume", help="Restart a workflow's schedule from now on.").add_argument("name")
        sub.add_parser("cancel", help="Cancel a running workflow run.").add_argument("id", type=int)

    def handle(self, *args, action, acting_user=None, **options):
        self.user = resolve_user(acting_user)
        getattr(self, f"handle_{action}")(**options)

    def act(self, action, *args):
        return act(action, *args, user=self.user)

    def handle_list(self, **options):
        rows = []
        for workflow in definitions.listed((visible_workflows(self.user) if self.user else Workflow.objects)
                                           .order_by("name")):
            last = workflow.last
            rows.append((workflow.name, workflow.node_count, workflow.describe_schedule(),
                         "yes" if workflow.enabled else "no",
                         when(workflow.next_run_at) if workflow.enabled else "- (paused)",
                         f"#{last.pk} {last.status}" if last else "-"))
        self.stdout.write(table(["NAME", "JOBS", "SCHEDULE", "ENABLED", "NEXT RUN", "LAST RUN"], rows) if rows
                          else "No workflows.")

    def handle_show(self, name, **options):
        workflow = find_workflow(name, self.user)
        nodes, edges = workflow.graph()
        self.stdout.write(f"name                 {workflow.name}")
        self.stdout.write(f"schedule             {workflow.describe_schedule()}")
        self.stdout.write(f"enabled              {workflow.enabled}")
        self.stdout.write(f"on_upstream_failure  {workflow.on_upstream_failure}")
        self.stdout.write("\nGraph, by depth:")
        for depth, layer in enumerate(definitions.layers(nodes, edges)):
            self.stdout.write(f"  {depth}: {', '.join(layer)}")
        for edge in edges:
            self.stdout.write(f"  {edge.upstream} → {edge.downstream}" + (f" (on failure: {edge.on_failure})"
                                                                          if edge.on_failure else ""))
        self.stdout.write("\nLast 5 runs:")
        recent = list(workflow.runs.order_by("-created_at", "-id")[:5])
        if not recent:
            self.stdout.write("  none")
        for wf_run in recent:
            self.print_run(wf_run)

    def print_run(self, wf_run):
        self.stdout.write(f"  #{wf_run.pk} {wf_run.status} ({wf_run.trigger}, {when(wf_run.created_at)})"
                          + (f": {wf_run.reason}" if wf_run.reason else ""))
        for step in wf_run.steps.select_related("job", "run"):
            run = f"run {step.run_id} {step.run.status}" if step.run else "no run"
            self.stdout.write(f"    {step.job.name}: {step.status} ({run})" + (f" {step.reason}" if step.reason else ""))

    def handle_run(self, name, wait, timeout, **options):
        wf_run = self.act(actions.run_now, find_workflow(name, self.user))
        self.started(wf_run, f"Workflow run {wf_run.pk} of {wf_run.workflow.name} started.", wait, timeout)

    def handle_pause(self, name, **options):
        workflow = self.act(actions.pause, find_workflow(name, self.user))
        self.stdout.write(f"Paused {workflow.name}.")

    def handle_resume(self, name, **options):
        workflow = self.act(actions.resume, find_workflow(name, self.user))
        self.stdout.write(f"Resumed {workflow.name}; next run {when(workflow.next_run_at)}.")

    def handle_rerun(self, id, wait, timeout, **options):
        wf_run = self.act(actions.rerun, find_run(id, self.user))
        self.started(wf_run, f"Workflow run {wf_run.pk} re-runs {id} from its failed steps.", wait, timeout)

    def handle_cancel(self, id, **options):
        wf_run = find_run(id, self.user)
        if self.act(actions.cancel, wf_run):
            self.stdout.write(f"Workflow run {id} cancelled.")
        else:
            self.stdout.write(f"Workflow run {id} is already {wf_run.status}; nothing changed.")

    def started(self, wf_run, says, wait, timeout):
        self.stdout.write(says)
        if wait:
            self.wait_for(wf_run, timeout)

    def wait_for(self, wf_run, timeout):
        wait_until_ended(wf_run, timeout, "Workflow run")
        self.print_run(wf_run)
        if wf_run.status != WorkflowRunStatus.SUCCEEDED:
            raise CommandError(f"Workflow run {wf_run.pk} ended {wf_run.status}.", returncode=EXIT_FAILED)
