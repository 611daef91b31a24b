"""``jobsctl windows …``: maintenance windows (``/api/windows/``): list, show, set (create or change)
and delete. A window is named by its name or id."""

import click

from . import output
from .resources import Resource, group_of
from .subcommands import subcommand


def when(window):
    if window["cron"]:
        return f"{window['cron']} ({window['timezone']}) for {window['duration_seconds']} s"
    return f"{window['starts_at']} to {window['ends_at']}"


def window_line(window):
    jobs = ", ".join(map(str, window["jobs"])) or "-"
    tags = ", ".join(window["tags"]) or "-"
    return f"{window['name']}: {window['mode']}, {when(window)}; jobs: {jobs}; tags: {tags}"


WINDOWS = Resource(
    "windows", "window", help="Maintenance windows: hold (skip the slots inside) or mute (notify nothing) some jobs.",
    columns=(("ID", lambda w: w["id"]), ("NAME", lambda w: w["name"]), ("MODE", lambda w: w["mode"]),
             ("WHEN", when), ("JOBS", lambda w: len(w["jobs"])), ("TAGS", lambda w: ",".join(w["tags"]) or "-")),
    list_help="List the maintenance windows.", empty="No windows.", show_help="One window.",
    show_argument="name", shown=window_line,
    delete_help="Delete the window NAME.")
group = group_of(WINDOWS)


@subcommand(group, "set")
@click.argument("name")
@click.option("--mode", type=click.Choice(["hold", "mute"]))
@click.option("--starts-at", help="A one-off window's start (ISO 8601).")
@click.option("--ends-at", help="A one-off window's end (ISO 8601).")
@click.option("--cron", help="A recurring window's starts (a cron expression).")
@click.option("--duration-seconds", type=int, help="How long a recurring window lasts.")
@click.option("--timezone", help="The cron expression's zone (default UTC).")
@click.option("--job", "jobs", type=int, multiple=True, help="A job id it applies to (repeat the option).")
@click.option("--tag", "tags", multiple=True, help="A tag whose jobs it applies to (repeat the option).")
@click.option("--description")
def set_window(ctx, as_json, name, jobs, tags, **options):
    """Create the window NAME, or change the options given."""
    body = {key: value for key, value in options.items() if value is not None}
    if jobs:
        body["jobs"] = list(jobs)
    if tags:
        body["tags"] = list(tags)
    window = WINDOWS.put(ctx.api, name, body)
    output.emit_json(window) if as_json else click.echo(window_line(window))

