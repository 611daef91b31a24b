"""``jobsctl workflows …``: the workflow calls of the API (list, show, run, pause, resume, the runs,
one run with its steps, re-run, cancel). Workflows are named by name or id, their runs by id."""

import sys
import time

import click

from . import output
from .errors import RUN_FAILED, WAIT_TIMED_OUT, CliError
from .resources import Resource, group_of
from .subcommands import subcommand, switch

TERMINAL = {"succeeded", "failed", "cancelled"}


WORKFLOWS = Resource(
    "workflows", "workflow", help="Workflows: list and show them; run, pause and resume them; follow, re-run and "
                                  "cancel their runs.",
    columns=(("ID", lambda w: w["id"]), ("NAME", lambda w: w["name"]), ("JOBS", lambda w: len(w["nodes"])),
             ("SCHEDULE", lambda w: output.schedule(w["schedule"])),
             ("ENABLED", lambda w: "yes" if w["enabled"] else "no"),
             ("NEXT RUN", lambda w: output.when(w["next_run_at"]) if w["enabled"] else "- (paused)"),
             ("LAST RUN", lambda w: f"{w['last_run']['status']} (#{w['last_run']['id']})" if w["last_run"] else "-")),
    list_help="List the workflows you can see.", empty="No workflows.")
group = group_of(WORKFLOWS)


def command(name=None, **attrs):
    return subcommand(group, name, **attrs)


def find_workflow(api, ref):
    """A workflow by name, or by id when none has that name."""
    return api.named("/api/workflows/", ref, "workflow", "jobsctl workflows list shows them")


def get_run(api, run_id):
    return api.get(f"/api/workflow-runs/{run_id}/", not_found=f"no workflow run {run_id} (or it is not yours to see).")


def post_run(api, run_id, call):
    return api.post(f"/api/workflow-runs/{run_id}/{call}/",
                    not_found=f"no workflow run {run_id} (or it is not yours to see).")


def runs_table(runs):
    return output.table(["ID", "WORKFLOW", "STATUS", "TRIGGER", "CREATED", "FINISHED", "REASON"], [
        (run["id"], run["workflow_name"], run["status"], run["trigger"], output.when(run["created_at"]),
         output.when(run["finished_at"]), run["reason"] or "-") for run in runs])


def run_lines(run):
    lines = [f"workflow run {run['id']} of {run['workflow_name']}: {run['status']}"
             + (f" ({run['reason']})" if run.get("reason") else "")]
    for step in run["steps"]:
        ran = f"run {step['run']} {step['run_status']}" if step["run"] else "no run"
        lines.append(f"  {step['job_name']}: {step['status']} ({ran})" + (f" {step['reason']}" if step["reason"] else ""))
    return lines


def started(ctx, as_json, wf_run, wait, timeout, interval, verb):
    """Print a workflow run just started (or re-run); with ``wait``, follow it to its end and exit 1
    unless it succeeded."""
    output.started(wf_run, as_json, f"Workflow run {wf_run['id']} of {wf_run['workflow_name']} {verb}", wait)
    if not wait:
        return
    deadline = time.monotonic() + timeout
    while wf_run["status"] not in TERMINAL:
        if time.monotonic() >= deadline:
            raise CliError(WAIT_TIMED_OUT, f"workflow run {wf_run['id']} is still {wf_run['status']} after "
                                           f"{timeout:g} s.")
        time.sleep(interval)
        wf_run = get_run(ctx.api, wf_run["id"])
    if as_json:
        output.emit_json(wf_run)
    else:
        click.echo("\n".join(run_lines(wf_run)))
    if wf_run["status"] != "succeeded":
        sys.exit(RUN_FAILED)


def wait_options(function):
    function = click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
                            help="Seconds between looks with --wait.")(function)
    function = click.option("--timeout", default=3600.0, show_default=True, type=click.FloatRange(min=0),
                            help="Seconds to wait with --wait (then exit 7).")(function)
    return click.option("--wait", is_flag=True,
                        help="Wait for the workflow run to end; exit 0 if it succeeded, 1 if not.")(function)


@command()
@click.argument("workflow")
def show(ctx, as_json, workflow):
    """One workflow: its schedule, its graph and its last 5 runs."""
    found = find_workflow(ctx.api, workflow)
    runs = ctx.api.get_all("/api/workflow-runs/", {"workflow": found["id"]}, limit=5)
    if as_json:
        output.emit_json({"workflow": found, "recent_runs": runs})
        return
    fields = [("id", found["id"]), ("name", found["name"]), ("description", found["description"]),
              ("schedule", output.schedule(found["schedule"])), ("enabled", found["enabled"]),
              ("on_upstream_failure", found["on_upstream_failure"]),
              ("next_run_at", output.when(found["next_run_at"]) if found["enabled"] else "- (paused)"),
              ("owner", found["owner"]), ("group", found["group"]), ("nodes", ", ".join(found["nodes"]))]
    width = max(len(name) for name, _ in fields)
    click.echo("\n".join(f"{name.ljust(width)}  {output.shown(value)}" for name, value in fields))
    click.echo("\nEdges:\n" + ("\n".join(f"  {e['from']} -> {e['to']}" + (f" (on failure: {e['on_failure']})"
                                                                         if e.get("on_failure") else "")
                                        for e in found["edges"]) or "  none"))
    click.echo("\nLast runs:\n" + (runs_table(runs) if runs else "none"))


@command()
@click.argument("workflow")
@wait_options
def run(ctx, as_json, workflow, wait, timeout, interval):
    """Start a run of a workflow now."""
    found = find_workflow(ctx.api, workflow)
    started(ctx, as_json, ctx.api.post(f"/api/workflows/{found['id']}/run/"), wait, timeout, interval, "started")


pause = switch(group, "pause", "workflows", find_workflow, "workflow", help="Pause a workflow's schedule (run still works).")
resume = switch(group, "resume", "workflows", find_workflow, "workflow", help="Resume a workflow's schedule from now on.")


@command()
@click.argument("workflow", required=False)
@click.option("--status", type=click.Choice(sorted(TERMINAL | {"running"})), help="Only runs in this status.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many, newest first.")
def runs(ctx, as_json, workflow, status, limit):
    """Workflow runs, newest first (of one workflow, or of every one you can see)."""
    params = {"status": status} if status else {}
    if workflow:
        params["workflow"] = find_workflow(ctx.api, workflow)["id"]
    output.listed(ctx.api.get_all("/api/workflow-runs/", params, limit=limit), as_json, runs_table, "No workflow runs.")


@command()
@click.argument("run_id", type=int)
def status(ctx, as_json, run_id):
    """One workflow run with its steps: each job's status and run."""
    found = get_run(ctx.api, run_id)
    if as_json:
        output.emit_json(found)
    else:
        click.echo("\n".join(run_lines(found)))


@command()
@click.argument("run_id", type=int)
@wait_options
def rerun(ctx, as_json, run_id, wait, timeout, interval):
    """Re-run a failed or cancelled workflow run from its failed steps."""
    started(ctx, as_json, post_run(ctx.api, run_id, "rerun"), wait, timeout, interval, f"re-runs {run_id}")


@command()
@click.argument("run_id", type=int)
def cancel(ctx, as_json, run_id):
    """Cancel a running workflow run (a finished one is left as it is)."""
    answer = post_run(ctx.api, run_id, "cancel")
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(f"workflow run {run_id}: {answer['detail']}")
