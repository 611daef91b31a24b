"""``jobsctl limits …``: limits shared across jobs (``/api/limits/``): list and show them (anyone),
set and delete them (staff). A limit is named by its key."""

import click

from . import output
from .resources import Resource, group_of
from .subcommands import subcommand


def limit_line(limit):
    rate = f", at most {limit['max_starts_per_minute']} starts a minute" if limit["max_starts_per_minute"] else ""
    return (f"{limit['key']}: {limit['running']} of {limit['max_running']} running{rate}; {limit['waiting']} waiting; "
            f"named by {limit['jobs']} job(s)")


LIMITS = Resource(
    "limits", "limit", help="Limits shared across jobs: at most N runs of their jobs at once, at most M starts a minute.",
    columns=(("KEY", lambda lim: lim["key"]), ("RUNNING", lambda lim: lim["running"]),
             ("MAX", lambda lim: lim["max_running"]), ("STARTS/MIN", lambda lim: lim["max_starts_per_minute"] or "-"),
             ("WAITING", lambda lim: lim["waiting"]), ("JOBS", lambda lim: lim["jobs"])),
    list_help="Every limit with what runs and waits under it.", show_help="One limit.", show_argument="key",
    delete_help="Delete the limit KEY (staff only; refused while jobs name it).", shown=limit_line)
group = group_of(LIMITS)


@subcommand(group, "set")
@click.argument("key")
@click.option("--max-running", type=int, help="At most this many runs of its jobs running at once.")
@click.option("--max-starts-per-minute", type=int, help="At most this many starts a minute (0: no rate limit).")
@click.option("--description")
def set_limit(ctx, as_json, key, max_running, max_starts_per_minute, description):
    """Create the limit KEY, or change the options given (staff only)."""
    body = {name: value for name, value in (("max_running", max_running), ("description", description)) if value is not None}
    if max_starts_per_minute is not None:
        body["max_starts_per_minute"] = max_starts_per_minute or None
    limit = LIMITS.put(ctx.api, key, body)
    output.emit_json(limit) if as_json else click.echo(limit_line(limit))

