"""``jobsctl calendars …``: the calendars of the API (list, show one with its dates and holidays,
import an ICS file into one). Calendars are named by name or id."""

from pathlib import Path

import click

from . import output
from .errors import REJECTED, CliError
from .resources import Resource, group_of
from .subcommands import subcommand


def calendar_text(found):
    lines = [f"{found['name']}" + (f": {found['description']}" if found["description"] else "")]
    for title, items in (("Dates", found["dates"]), ("Holidays", found["holidays"])):
        if items or title == "Dates":
            lines.append(f"\n{title}:\n" + ("\n".join(f"  {i['date']}  {i['label']}".rstrip() for i in items) or "  none"))
    return "\n".join(lines)


CALENDARS = Resource(
    "calendars", "calendar", help="Calendars (holidays and closures that jobs skip): list, show, import an ICS file "
                                  "(staff).",
    columns=(("ID", lambda c: c["id"]), ("NAME", lambda c: c["name"]),
             ("HOLIDAYS OF", lambda c: "-".join(filter(None, [c["country"], c["subdivision"]])) or "-"),
             ("DATES", lambda c: len(c["dates"])), ("DESCRIPTION", lambda c: c["description"] or "-")),
    list_help="List the calendars.", empty="No calendars.",
    show_help="One calendar: its typed-in dates, and its country's holidays this year and next.",
    show_argument="calendar", shown=calendar_text)
group = group_of(CALENDARS)


def refused(body):
    """A file the server refused: its reason, on one line."""
    raise CliError(REJECTED, "refused: " + " ".join(body.get("file") or [str(body.get("detail", body))]))


@subcommand(group, "import")
@click.argument("calendar")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Replace the typed-in dates instead of adding to them.")
def import_ics(ctx, as_json, calendar, file, replace):
    """Import an iCalendar (.ics) FILE's events as dates of CALENDAR (staff only)."""
    found = CALENDARS.find(ctx.api, calendar)
    answer = ctx.api.upload(f"{CALENDARS.path_of(found['id'])}import/", file.read_bytes(), "text/calendar",
                            params={"replace": "true" if replace else "false"},
                            rejected=refused)
    if as_json:
        output.emit_json(answer)
    else:
        click.echo(f"Imported: {answer['name']} has {len(answer['dates'])} typed-in date(s).")
