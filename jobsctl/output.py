"""How things look on a terminal: tables, times in UTC, schedules and durations in words."""

import json
from datetime import UTC, datetime

import click


def emit_json(value):
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def table(headers, rows):
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def when(text):
    """An ISO 8601 time from the API as ``2026-11-20 03:00:00 UTC``; ``-`` for none."""
    if not text:
        return "-"
    moment = datetime.fromisoformat(text)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value):
    if value is None:
        return "-"
    value = float(value)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value:.1f}s" if value % 1 else f"{value:g}s"


def schedule(spec):
    kind = (spec or {}).get("type")
    if kind == "cron":
        return f"cron {spec['cron']} ({spec['timezone']})"
    if kind == "interval":
        return f"every {seconds(spec['every_seconds'])}"
    if kind == "once":
        return f"once at {when(spec['run_at'])}"
    return "manual"


def last_run(job):
    run = job.get("last_run")
    return f"{run['status']} (#{run['id']})" if run else "-"


def jobs_table(jobs):
    return table(["ID", "NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT RUN", "LAST RUN"], [
        (job["id"], job["name"], job["kind"], schedule(job["schedule"]), "yes" if job["enabled"] else "no",
         when(job["next_run_at"]) if job["enabled"] else "- (paused)", last_run(job)) for job in jobs])


def runs_table(runs):
    return table(["ID", "JOB", "STATUS", "TRIGGER", "ATTEMPT", "SCHEDULED FOR", "DURATION", "WORKER", "PARAMS"], [
        (run["id"], run["job_name"], run["status"], run["trigger"], f"{run['attempt']}/{run['max_attempts']}",
         when(run["scheduled_for"]), seconds(run["duration_seconds"]), run["worker"] or "-", params_text(run))
        for run in runs])


def params_text(run):
    """A run's parameter values in one cell: name=value, ..."""
    return ", ".join(f"{name}={shown(value)}" for name, value in (run.get("params") or {}).items()) or "-"


JOB_FIELDS = ["id", "name", "description", "owner", "group", "tags", "kind", "target", "parameters", "args", "kwargs",
              "http_method", "http_ok_statuses", "ping_url", "grace_seconds", "enabled", "queue", "max_retries",
              "timeout_seconds", "sla_seconds", "min_duration_seconds", "overlap_policy", "catchup_policy", "pause_after_failures", "consecutive_failures",
              "dst_skipped", "dst_repeated"]


def job_lines(job):
    fields = [(name, job.get(name)) for name in JOB_FIELDS if name in job]
    if job["kind"] != "http":
        fields = [(name, value) for name, value in fields if not name.startswith("http_")]
    if not job.get("ping_url"):  # a check-in's only (a job that runs elsewhere)
        fields = [(name, value) for name, value in fields if name not in ("ping_url", "grace_seconds")]
    fields.insert(fields.index(("kind", job["kind"])), ("schedule", schedule(job["schedule"])))
    fields.append(("next_run_at", when(job["next_run_at"]) if job["enabled"] else "- (paused)"))
    if job.get("paused_reason"):  # it paused itself (auto-pause)
        fields.append(("paused_reason", job["paused_reason"]))
    if job.get("snoozed_until"):  # no notification of it until then
        fields.append(("snoozed_until", job["snoozed_until"]))
    fields.append(("last_run", last_run(job)))
    if job["schedule"]["type"] != "cron":
        fields = [(name, value) for name, value in fields if not name.startswith("dst_")]
    for change in (job.get("dst_preview") or {}).get("transitions", []):
        fields.append(("clock change", change["description"]))
        fields.extend(("", f"  {slot['text']}") for slot in change["slots"])
    width = max(len(name) for name, _ in fields)
    return [f"{name.ljust(width)}  {shown(value)}" for name, value in fields]


def shown(value):
    if value is None or value == "":
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def emit_line(value):
    """One JSON object on one line (JSON Lines), for streams."""
    click.echo(json.dumps(value, ensure_ascii=False))


def switched(answer, as_json, paused):
    """The answer to pausing or resuming a job's or a workflow's schedule: as JSON, or in a line."""
    if as_json:
        emit_json(answer)
    elif paused:
        click.echo(f"Paused {answer['name']}.")
    else:
        click.echo(f"Resumed {answer['name']}; next run {when(answer['next_run_at'])}.")


def started(answer, as_json, says, wait):
    """A run or a workflow run just started, which ``says`` (its id and what of): as JSON, or in a
    line; with ``wait``, only a line on stderr, the run's end being the answer."""
    if wait:
        if not as_json:
            click.echo(f"{says}; waiting for it to end.", err=True)
    elif as_json:
        emit_json(answer)
    else:
        click.echo(f"{says}.")


def listed(found, as_json, table, empty):
    """A list the API answered: as JSON, or as ``table`` lays it out, or ``empty`` when there is none."""
    if as_json:
        emit_json(found)
    else:
        click.echo(table(found) if found else empty)


def audit_table(entries):
    return table(["WHEN", "SUBJECT", "NAME", "ACTION", "ACTOR", "SOURCE", "DETAIL"], [
        (when(entry["created_at"]), entry["subject"], entry["name"], entry["action"], entry["actor"], entry["source"],
         entry["detail"] or ", ".join(entry["changes"]) or "-") for entry in entries])
