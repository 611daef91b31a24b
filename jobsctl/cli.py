"""jobsctl's commands. Every command takes --json (the API's answer as JSON on stdout); errors are
one line on stderr, and the exit code says which (``errors``)."""

import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from . import __version__, calendars, config, limits, output, windows, workflows
from .client import Api
from .errors import INTERRUPTED, NOT_FOUND, OK, REJECTED, RUN_FAILED, USAGE, WAIT_TIMED_OUT, CliError
from .subcommands import subcommand, switch
from .tailing import TERMINAL, Follower

TOKEN_PREFIX_LENGTH = 15  # the server names a token by its key's first 15 characters
RELATIVE = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
EXIT_CODES = """\b
Exit codes: 0 ok; 1 the run or workflow run failed (--wait, tail) or a slot is missing (slots); 2 usage or
configuration; 3 not found; 4 no token, a refused token or not allowed; 5 server unreachable;
6 input refused (a bad value, a file with errors); 7 still running after --timeout; 8 server error;
130 interrupted (Ctrl-C)."""


class Context:
    def __init__(self, url, config_path, http_timeout, as_json):
        self.url, self.config_path, self.http_timeout, self.json = url, config_path, http_timeout, as_json
        self._api = None

    @property
    def settings(self):
        return config.resolve(self.url, self.config_path)

    @property
    def api(self):
        if self._api is None:
            self._api = Api(self.settings, timeout=self.http_timeout)
        return self._api


def command(name=None, **attrs):
    """A top-level subcommand with --json (``subcommands.subcommand``)."""
    return subcommand(cli, name, **attrs)


@click.group(epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", metavar="URL", help="The service, e.g. https://scheduler.example.com "
                                           "(default: JOBSCTL_URL, the config file, http://127.0.0.1:8000).")
@click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="Config file (default: JOBSCTL_CONFIG, ~/.config/jobsctl/config.toml).")
@click.option("--http-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds to wait for each answer.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answers as JSON (every command).")
@click.version_option(__version__, prog_name="jobsctl")
@click.pass_context
def cli(click_ctx, url, config_path, http_timeout, as_json):
    """Run and watch the job scheduler's jobs from anywhere, through its REST API.

    The token comes from JOBSCTL_TOKEN or the config file; jobs are named by name or id."""
    click_ctx.obj = Context(url, config_path, http_timeout, as_json)


cli.add_command(workflows.group)
cli.add_command(limits.group)
cli.add_command(calendars.group)
cli.add_command(windows.group)


def main():
    try:
        code = cli.main(prog_name="jobsctl", standalone_mode=False)
    except click.Abort:  # Ctrl-C: click's own answer would be exit 1, which here means "the run failed"
        click.echo("jobsctl: interrupted.", err=True)
        sys.exit(INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else OK)


# --- finding things

def find_job(api, ref):
    """A job by name, or by id when no job has that name."""
    return api.named("/api/jobs/", ref, "job", "jobsctl list shows the jobs")


def get_run(api, run_id):
    return api.get(f"/api/runs/{run_id}/", not_found=f"no run {run_id} (or it is not yours to see).")


def since_param(text, ahead=False):
    """``1h``, ``30m``, ``2d`` (before now; ``ahead``: after now) or an ISO 8601 time, as the API's
    ``since``."""
    match = RELATIVE.match(text.strip())
    try:
        if match:
            span = timedelta(**{UNITS[match[2]]: int(match[1])})
            return (datetime.now(UTC) + (span if ahead else -span)).isoformat()
    except OverflowError:
        pass  # no time that far away: not a time, as moment_param says
    return text


def moment_param(text, option, ahead=False):
    """``since_param``, checked here: a time that is neither relative nor ISO 8601 is a usage error
    naming the option."""
    value = since_param(text, ahead)
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise CliError(USAGE, f"{option}: {text!r} is not a time: give ISO 8601 (2026-11-20T03:00Z) "
                              f"or a time {'from' if ahead else 'before'} now (30m, 6h, 2d).") from None
    return value


# --- jobs

@command("list")
@click.option("--tag", help="Only jobs with this tag.")
@click.option("--kind", type=click.Choice(["callable", "task", "command", "http", "checkin"]))
@click.option("--enabled/--paused", default=None, help="Only enabled, or only paused, jobs.")
def list_jobs(ctx, as_json, tag, kind, enabled):
    """List the jobs you can see."""
    params = {"tag": tag, "kind": kind, "enabled": None if enabled is None else str(enabled).lower()}
    jobs = ctx.api.get_all("/api/jobs/", {key: value for key, value in params.items() if value is not None})
    if as_json:
        output.emit_json(jobs)
    else:
        click.echo(output.jobs_table(jobs) if jobs else "No jobs.")


@command()
@click.argument("job")
def show(ctx, as_json, job):
    """One job: its fields, schedule, next run and its last 5 runs."""
    found = find_job(ctx.api, job)
    # The list leaves out what only one job's view shows (its dst_preview).
    found = ctx.api.get(f"/api/jobs/{found['id']}/", not_found=f"no job named '{job}' (it was deleted meanwhile)")
    runs = ctx.api.get_all("/api/runs/", {"job": found["id"]}, limit=5)
    if as_json:
        output.emit_json({"job": found, "recent_runs": runs})
        return
    click.echo("\n".join(output.job_lines(found)))
    click.echo("\nLast runs:\n" + (output.runs_table(runs) if runs else "none"))


def param_values(texts):
    """``--param NAME=VALUE`` options as the API's ``params`` object (values as text: the service
    types each by the job's declaration)."""
    values = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise CliError(USAGE, f"--param {text!r}: give NAME=VALUE, such as --param day=2026-11-01.")
        if name.strip() in values:
            raise CliError(USAGE, f"--param {name.strip()} is given twice.")
        values[name.strip()] = value
    return values


PARAM_OPTION = click.option(
    "--param", "params", multiple=True, metavar="NAME=VALUE",
    help="A value of one of the job's parameters (repeatable); the job's defaults fill the rest.")


@command()
@click.argument("job")
@PARAM_OPTION
@click.option("--wait", is_flag=True, help="Wait for the run to end; exit 0 if it succeeded, 1 if not.")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait with --wait (then exit 7).")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between looks with --wait.")
def run(ctx, as_json, job, params, wait, timeout, interval):
    """Run a job now, with --param values of its parameters."""
    values = param_values(params)
    found = find_job(ctx.api, job)
    queued = ctx.api.post(f"/api/jobs/{found['id']}/run/", {"params": values} if values else None)
    output.started(queued, as_json, f"Run {queued['id']} of {found['name']} queued", wait)
    if not wait:
        return
    finished = wait_for_end(ctx.api, queued["id"], timeout, interval)
    if as_json:
        output.emit_json(finished)
    else:
        click.echo(run_summary(finished))
    exit_for(finished)


def wait_for_end(api, run_id, timeout, interval, on_look=None):
    deadline = time.monotonic() + timeout
    while True:
        current = get_run(api, run_id)
        if on_look is not None:
            on_look(current)
        if current["status"] in TERMINAL:
            return current
        if time.monotonic() >= deadline:
            raise CliError(WAIT_TIMED_OUT, f"run {run_id} is still {current['status']} after {timeout:g} s.")
        time.sleep(interval)


def run_summary(run):
    lines = [f"run {run['id']} of {run['job_name']}: {run['status']}",
             *([f"params: {', '.join(f'{k}={v}' for k, v in run['params'].items())}"] if run.get("params") else []),
             f"attempts: {run['attempt']}/{run['max_attempts']}",
             f"worker: {run['worker'] or '-'}",
             f"duration: {output.seconds(run['duration_seconds'])}"]
    if run.get("reason"):
        lines.append(f"reason: {run['reason']}")
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    lines.append("output:" + (f"\n{run['output']}" if run.get("output") else " (none)"))
    return "\n".join(lines)


def exit_for(run):
    if run["status"] != "succeeded":
        sys.exit(RUN_FAILED)


pause = switch(cli, "pause", "jobs", find_job, "job", help="Pause a job's schedule (run now still works).")
resume = switch(cli, "resume", "jobs", find_job, "job", help="Resume a job's schedule from now on.")


@command()
@click.argument("job")
@click.option("--until", "until", required=True, metavar="TIME",
              help="When its notifications start again: ISO 8601 (UTC unless it has an offset) or a time from now "
                   "(30m, 6h, 2d); at most 90 days ahead.")
def snooze(ctx, as_json, job, until):
    """Send no notification of a job until TIME: its runs go on, what they would send is recorded, not sent."""
    found = find_job(ctx.api, job)
    answer = ctx.api.post(f"/api/jobs/{found['id']}/snooze/", {"until": moment_param(until, "--until", ahead=True)})
    said(answer, as_json, f"Snoozed {answer['name']} until {answer['snoozed_until']}.")


@command()
@click.argument("job")
def unsnooze(ctx, as_json, job):
    """Notify about a job again from now on."""
    answer = ctx.api.post(f"/api/jobs/{find_job(ctx.api, job)['id']}/unsnooze/")
    said(answer, as_json, f"{answer['name']} is no longer snoozed.")


@command("ack")
@click.argument("job")
def acknowledge(ctx, as_json, job):
    """Acknowledge a job's open incident: the channels told of it hear that someone is on it."""
    found = find_job(ctx.api, job)
    answer = ctx.api.post(f"/api/jobs/{found['id']}/acknowledge/")
    said(answer, as_json, f"Acknowledged {found['name']}'s incident (opened {answer['opened_at']}).")


def said(answer, as_json, line):
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(line)


@command()
@click.argument("job")
@click.option("--start", "--from", "start", required=True, metavar="TIME",
              help="The range's start: ISO 8601 (UTC unless it has an offset) or before now (2d, 6h).")
@click.option("--end", "--to", "end", required=True, metavar="TIME", help="The range's end, excluded; as --start.")
@click.option("--dry-run", is_flag=True, help="List the slots and which have a run; create nothing.")
@PARAM_OPTION
def backfill(ctx, as_json, job, start, end, dry_run, params):
    """Create the runs of a job's past slots in [START, END); a slot with a run is left alone. Each
    run gets the --param values."""
    body = {"start": moment_param(start, "--start"), "end": moment_param(end, "--end"), "dry_run": dry_run}
    if values := param_values(params):
        body["params"] = values
    found = find_job(ctx.api, job)
    answer = ctx.api.post(f"/api/jobs/{found['id']}/backfill/", body)
    if as_json:
        output.emit_json(answer)
        return
    existing = sum(slot["run"] is not None for slot in answer["slots"])
    if dry_run:
        rows = [(output.when(slot["scheduled_for"]), slot["run"] or "-") for slot in answer["slots"]]
        click.echo(output.table(["SLOT", "RUN"], rows) if rows else "No slots in the range.")
        click.echo(f"dry run: {answer['to_create']} run(s) to create, {existing} slot(s) already have one; "
                   "nothing was created.")
    else:
        ids = ", ".join(str(run_id) for run_id in answer["created"]) or "none"
        click.echo(f"Backfilled {found['name']}: {len(answer['created'])} run(s) queued ({ids}); "
                   f"{existing} slot(s) already had a run.")


# --- runs

@command("cancel")
@click.argument("run_id", type=int)
def cancel_run(ctx, as_json, run_id):
    """Cancel a queued, retrying or running run (a finished one is left as it is)."""
    act_on_run(ctx, as_json, run_id, "cancel", lambda answer: answer["detail"])


def act_on_run(ctx, as_json, run_id, call, said):
    """POST /api/runs/<id>/<call>/, answered as JSON or in one line (``said(answer)``)."""
    answer = ctx.api.post(f"/api/runs/{run_id}/{call}/", not_found=f"no run {run_id} (or it is not yours to see).")
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(f"run {run_id}: {said(answer)}")


class ListingFirst(click.Group):
    """A group whose first word, when it names none of its commands, is its listing's (``list``):
    ``jobsctl runs [JOB] [--status ...]`` lists, ``jobsctl runs rerun ID`` reruns."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=ListingFirst)
def runs():
    """Run history (``jobsctl runs [JOB]``, the same as ``runs list``), and reruns."""


@subcommand(runs, "list")
@click.argument("job", required=False)
@click.option("--status", help="Only runs in this status (failed, running, ...).")
@click.option("--since", help="Created since: 30m, 1h, 2d, or an ISO 8601 time.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many, newest first.")
@click.option("--param", "values", multiple=True, metavar="NAME=VALUE",
              help="Only runs given this value of the job's parameter NAME (repeatable; needs JOB).")
def list_runs(ctx, as_json, job, status, since, limit, values):
    """Run history, newest first (of one job, or of every job you can see)."""
    params = {"status": status, "since": since and since_param(since)}
    if values and not job:
        raise CliError(USAGE, "--param filters the runs of one job: name the JOB.")
    params.update({f"param.{name}": value for name, value in param_values(values).items()})
    if job:
        params["job"] = find_job(ctx.api, job)["id"]
    found = ctx.api.get_all("/api/runs/", {k: v for k, v in params.items() if v is not None}, limit=limit)
    output.listed(found, as_json, output.runs_table, "No runs.")


@subcommand(runs, "rerun")
@click.argument("run_id", type=int, required=False)
@click.option("--job", help="Many: the finished runs of this job (name or id)...")
@click.option("--tag", help="... or of the jobs carrying this tag.")
@click.option("--status", default="failed", show_default=True, help="Many: those that ended so.")
@click.option("--since", metavar="TIME", help="Many: created since (30m, 1d, or ISO 8601).")
@click.option("--until", metavar="TIME", help="Many: created before (default: now).")
@click.option("--dry-run", is_flag=True, help="Many: only list the runs.")
def rerun_run(ctx, as_json, run_id, job, tag, status, since, until, dry_run):
    """Run a finished run again as itself: the same slot and idempotency key, its next attempt. Or
    many: --job or --tag, --status, --since [--until] [--dry-run] (at most the server's
    JOBS_RERUN_MAX_RUNS)."""
    if run_id is not None:
        if job or tag or since or until or dry_run:
            raise CliError(USAGE, "give a RUN_ID, or --job/--tag and --since for many runs, not both.")
        act_on_run(ctx, as_json, run_id, "rerun", lambda answer: f"queued again as attempt {answer['attempt']}.")
        return
    if bool(job) == bool(tag) or not since:
        raise CliError(USAGE, "give a RUN_ID, or one of --job and --tag, and --since.")
    body = {"status": status, "since": moment_param(since, "--since"),
            "until": moment_param(until, "--until") if until else datetime.now(UTC).isoformat(), "dry_run": dry_run}
    body.update({"job": find_job(ctx.api, job)["id"]} if job else {"tag": tag})
    answer = ctx.api.post("/api/runs/rerun/", body)
    if as_json:
        output.emit_json(answer)
        return
    ids = ", ".join(str(found) for found in answer["runs"]) or "none"
    click.echo(f"{'Would rerun' if dry_run else 'Rerun'} {len(answer['runs'])} run(s): {ids}.")


@command()
@click.option("--subject", help="Only entries about this: job, workflow, user, token, group, ...")
@click.option("--actor", help="Only what this user did ('system': the service).")
@click.option("--action", help="Only this action: create, change, login, login_failed, revoke, ...")
@click.option("--since", help="Since: 30m, 1h, 2d, or an ISO 8601 time.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1), help="How many, newest first.")
def audit(ctx, as_json, subject, actor, action, since, limit):
    """The audit trail, newest first: what you may see (staff: everything)."""
    params = {"subject": subject, "actor": actor, "action": action, "since": since and since_param(since)}
    found = ctx.api.get_all("/api/audit/", {k: v for k, v in params.items() if v is not None}, limit=limit)
    output.listed(found, as_json, output.audit_table, "No entries.")


@command()
@click.argument("run_id", required=False, type=int)
@click.option("--job", help="Follow this job's newest run instead.")
@click.option("--timeout", default=3600.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to follow before giving up (then exit 7).")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between looks.")
def tail(ctx, as_json, run_id, job, timeout, interval):
    """Print a run's output as it is written, until the run ends.

    Exits 0 if the run succeeded, 1 if not. With --json, one JSON object a line: {"output": ...}
    for each new part, then the run as it ended."""
    if (run_id is None) == (job is None):
        raise CliError(USAGE, "tail: give a run id, or --job JOB for the job's newest run.")
    if job is not None:
        newest = ctx.api.get_all("/api/runs/", {"job": find_job(ctx.api, job)["id"]}, limit=1)
        if not newest:
            raise CliError(NOT_FOUND, f"the job {job!r} has no runs yet.")
        run_id = newest[0]["id"]
    follower = Follower()

    def show_new(current):
        text = follower.new_output(current)
        if not text:
            return
        if as_json:
            output.emit_line({"run": current["id"], "output": text})
        else:
            click.echo(text, nl=False)

    finished = wait_for_end(ctx.api, run_id, timeout, interval, on_look=show_new)
    if as_json:
        output.emit_line(finished)
    else:
        if finished.get("output") and not finished["output"].endswith("\n"):
            click.echo()
        click.echo(f"run {finished['id']} {finished['status']}" +
                   (f": {finished['error']}" if finished.get("error") else ""), err=True)
    exit_for(finished)


# --- jobs as code

@command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--dry-run", is_flag=True, help="Print the plan and check it; change nothing.")
@click.option("--prune", is_flag=True, help="Delete the jobs (yours, unless you are staff) not in the file.")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]),
              help="The file's format (default: from its name; - reads YAML from stdin).")
def apply(ctx, as_json, file, dry_run, prune, fmt):
    """Make the jobs match a YAML or JSON file, all or nothing."""
    fmt = fmt or file_format(file)
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(USAGE, f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}.") from None

    def show_errors(answer):
        if as_json:
            output.emit_json(answer)
        for error in answer.get("errors", []):
            click.echo(f"jobsctl: {file}: {error['text']}", err=True)
        if "errors" in answer:
            raise CliError(REJECTED, f"{file}: nothing was applied ({len(answer['errors'])} error(s)).")

    answer = ctx.api.post("/api/jobs-as-code/", {"text": text, "format": fmt, "dry_run": dry_run, "prune": prune},
                          rejected=show_errors)
    if as_json:
        output.emit_json(answer)
        return
    for line in answer["plan"]:
        click.echo(line)
    if not answer["changes"]:
        click.echo("no changes")
    elif dry_run:
        click.echo("dry run: the plan is valid; nothing was saved.")
    else:
        counts = {action: sum(c["action"] == action for c in answer["changes"]) for action in
                  ("create", "update", "delete")}
        click.echo(f"applied: {counts['create']} created, {counts['update']} updated, {counts['delete']} deleted.")


def file_format(path):
    if path == "-" or path.endswith((".yaml", ".yml")):
        return "yaml"
    if path.endswith(".json"):
        return "json"
    raise CliError(USAGE, f"{path}: name a .yaml, .yml or .json file (or - for YAML on stdin), or give --format.")


@command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]),
              help="Default: from the file's name, else yaml.")
def export(ctx, as_json, file, fmt):
    """Write the jobs you may apply to as a file (stdout without FILE)."""
    fmt = fmt or (file_format(file) if file and file != "-" else "yaml")
    answer = ctx.api.get("/api/jobs-as-code/", {"file_format": fmt})
    if file and file != "-":
        try:
            Path(file).write_text(answer["text"], encoding="utf-8")
        except OSError as exc:
            raise CliError(USAGE, f"cannot write {file}: {exc.strerror}.") from None
    if as_json:
        output.emit_json(answer)
    elif file and file != "-":
        click.echo(f"Exported {answer['jobs']} jobs to {file}.")
    else:
        click.echo(answer["text"], nl=False)


# --- slots

@command()
@click.argument("job")
@click.option("--from", "start", metavar="TIME", help="ISO 8601; default 24 hours ago.")
@click.option("--to", "end", metavar="TIME", help="ISO 8601, excluded; default now.")
def slots(ctx, as_json, job, start, end):
    """Every slot of a range and what became of it; exits 1 if one is missing."""
    found = find_job(ctx.api, job)
    params = {key: value for key, value in (("start", start), ("end", end)) if value}
    report = ctx.api.get(f"/api/jobs/{found['id']}/slots/", params)
    if as_json:
        output.emit_json(report)
    else:
        rows = [(output.when(slot["scheduled_for"]), slot["outcome"],
                 f"{slot['run']['id']} ({slot['run']['status']})" if slot["run"] else "-", slot["reason"] or "-")
                for slot in report["slots"]]
        click.echo(output.table(["SLOT", "OUTCOME", "RUN", "REASON"], rows) if rows else "No slots in the range.")
        click.echo(", ".join(f"{count} {outcome}" for outcome, count in report["counts"].items()))
    if report["counts"].get("missing"):
        click.echo(f"jobsctl: {report['counts']['missing']} slot(s) missing: a 'missed' alert was raised.",
                   err=True)
        sys.exit(RUN_FAILED)


@command()
@click.argument("job")
@click.argument("at", metavar="TIME")
def why(ctx, as_json, job, at):
    """Why did (or didn't) the job run at TIME (ISO 8601, UTC unless it has an offset)?"""
    answer = ctx.api.get(f"/api/jobs/{find_job(ctx.api, job)['id']}/why/", {"at": at})
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(answer["explanation"])


# --- the load forecast


@command()
@click.option("--hours", default=24, show_default=True, type=click.IntRange(1, 168), help="How far ahead.")
@click.option("--peaks", default=10, show_default=True, type=click.IntRange(1, 50), help="Busiest minutes shown.")
def forecast(ctx, as_json, hours, peaks):
    """Runs due per minute over the next hours: the peaks, their jobs, the worker slots they need."""
    answer = ctx.api.get("/api/forecast/", {"hours": hours, "peaks": peaks})
    if as_json:
        output.emit_json(answer)
        return
    seen = answer["worker_slots_seen"]
    click.echo(f"{answer['total_runs']} runs in {answer['hours']} h, {answer['level']} a minute on average"
               + (f"; {seen} worker slot(s) seen in the last 10 minutes" if seen is not None else ""))
    rows = [(output.when(peak["minute"]), peak["runs"], peak["worker_slots_needed"],
             ", ".join(job["name"] for job in peak["jobs"][:5]) + (" …" if peak["jobs_total"] > 5 else ""),
             f"spread {peak['suggestion']['spread_seconds']} s" if peak["suggestion"] else "-")
            for peak in answer["peaks"]]
    click.echo(output.table(["MINUTE", "RUNS", "SLOTS NEEDED", "JOBS", "SUGGESTION"], rows) if rows
               else "No runs due.")


@command()
@click.argument("seconds", type=click.IntRange(0, 86400))
@click.argument("jobs", nargs=-1, required=True)
def spread(ctx, as_json, seconds, jobs):
    """Staff: set the spread of JOBS (names or ids) to SECONDS, in one audited action."""
    ids = [find_job(ctx.api, job)["id"] for job in jobs]
    answer = ctx.api.post("/api/forecast/spread/", {"jobs": ids, "spread": seconds})
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(f"Spread {seconds} s set on {answer['changed']} job(s).")


@command("tokens")
def list_tokens(ctx, as_json):
    """Your API tokens: the first characters of each, when made, when it expires; * marks this one."""
    found = ctx.api.get("/api/tokens/")
    if as_json:
        output.emit_json(found)
    else:
        click.echo(output.table(["", "token", "made", "expires"], [
            ["*" if token["current"] else "", f"{token['prefix']}…", output.when(token["created"]),
             output.when(token["expires"]) if token["expires"] else "never"] for token in found]))


@command("revoke-token")
@click.argument("prefix", required=False)
def revoke_token(ctx, as_json, prefix):
    """Revoke one of your API tokens, named by its first characters (jobsctl tokens lists them); without
    PREFIX, the token jobsctl uses now: after that it is refused."""
    prefix = prefix or (ctx.settings.token or "")[:TOKEN_PREFIX_LENGTH]
    ctx.api.delete(f"/api/tokens/{prefix}/", not_found=f"you have no token {prefix}… (jobsctl tokens lists them).")
    if as_json:
        output.emit_json({"revoked": prefix})
    else:
        click.echo(f"Revoked {prefix}…: it is refused from now on.")


@command("config")
def show_config(ctx, as_json):
    """Where the URL and the token come from (the token itself is not shown)."""
    settings = ctx.settings
    values = {"url": settings.url, "url_from": settings.url_from, "token_from": settings.token_from,
              "config_file": str(settings.config_path)}
    if as_json:
        output.emit_json(values)
    else:
        click.echo("\n".join(f"{key}: {value or '-'}" for key, value in values.items()))
