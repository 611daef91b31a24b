"""``jobsctl calendars …``: the calendars of the API (list, show one with its dates and holidays,
import an ICS file into one). Calendars are named by name or id."""

from pathlib import Path

import click

from . import output
from .errors import REJECTED, CliError
from .subcommands import subcommand


@click.group("calendars")
def group():
    """Calendars (holidays and closures that jobs skip): list, show, import an ICS file (staff)."""


def command(name=None, **attrs):
    return subcommand(group, name, **attrs)


def find_calendar(api, ref):
    return api.get(f"/api/calendars/{ref}/", not_found=f"no calendar {ref!r}; jobsctl calendars list shows them.")


@command("list")
def list_calendars(ctx, as_json):
    """List the calendars."""
    found = ctx.api.get_all("/api/calendars/")
    if as_json:
        output.emit_json(found)
        return
    rows = [(c["id"], c["name"], "-".join(filter(None, [c["country"], c["subdivision"]])) or "-", len(c["dates"]),
             c["description"] or "-") for c in found]
    click.echo(output.table(["ID", "NAME", "HOLIDAYS OF", "DATES", "DESCRIPTION"], rows) if rows else "No calendars.")


@command()
@click.argument("calendar")
def show(ctx, as_json, calendar):
    """One calendar: its typed-in dates, and its country's holidays this year and next."""
    found = find_calendar(ctx.api, calendar)
    if as_json:
        output.emit_json(found)
        return
    click.echo(f"{found['name']}" + (f": {found['description']}" if found["description"] else ""))
    for title, items in (("Dates", found["dates"]), ("Holidays", found["holidays"])):
        if items or title == "Dates":
            click.echo(f"\n{title}:\n" + ("\n".join(f"  {i['date']}  {i['label']}".rstrip() for i in items) or "  none"))


def refused(body):
    """A file the server refused: its reason, on one line."""
    raise CliError(REJECTED, "refused: " + " ".join(body.get("file") or [str(body.get("detail", body))]))


@command("import")
@click.argument("calendar")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Replace the typed-in dates instead of adding to them.")
def import_ics(ctx, as_json, calendar, file, replace):
    """Import an iCalendar (.ics) FILE's events as dates of CALENDAR (staff only)."""
    found = find_calendar(ctx.api, calendar)
    answer = ctx.api.upload(f"/api/calendars/{found['id']}/import/", file.read_bytes(), "text/calendar",
                            params={"replace": "true" if replace else "false"},
                            rejected=refused)
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(f"Imported: {answer['name']} has {len(answer['dates'])} typed-in date(s).")
