"""A jobsctl group of a resource of the API, declared once (``Resource``): ``list`` (a table of its
columns), ``show`` (one, named by its name or id) and ``delete``; the resource's module adds the commands of its
own to the group (``command``). jobsctl imports nothing of the service: these declarations are its
side of the service's ``jobs.resources``."""

from collections.abc import Callable
from dataclasses import dataclass

import click

from . import output
from .errors import NOT_FOUND, CliError
from .subcommands import subcommand


@dataclass(frozen=True)
class Resource:
    group: str  # the command group and the API's route: /api/<group>/
    noun: str
    help: str  # the group's
    columns: tuple  # (header, function of an item) of ``list``
    list_help: str
    empty: str | None = None  # said by ``list`` when there is none (None: the table's header alone)
    show_help: str | None = None  # None: no ``show`` (the resource's module has its own)
    show_argument: str = "name"
    shown: Callable | None = None  # one item as text
    delete_help: str | None = None  # None: no ``delete``

    @property
    def path(self):
        return f"/api/{self.group}/"

    def path_of(self, ref):
        return f"{self.path}{ref}/"

    def missing(self, ref):
        return f"no {self.noun} {ref!r}; jobsctl {self.group} list shows them."

    def find(self, api, ref):
        return api.get(self.path_of(ref), not_found=self.missing(ref))

    def put(self, api, ref, body):
        """Create the one named ``ref`` (its ``show_argument`` field) with ``body``, or change the
        fields ``body`` gives of the one that exists; the item as saved."""
        try:
            api.get(self.path_of(ref))
        except CliError as exc:
            if exc.exit_code != NOT_FOUND:
                raise
            return api.post(self.path, {self.show_argument: ref, **body})
        return api.request("PATCH", self.path_of(ref), body=body, not_found=self.missing(ref))


def group_of(resource):
    """The click group of ``resource`` with its ``list`` and ``show``."""
    group = click.Group(resource.group, help=resource.help)

    @subcommand(group, "list", help=resource.list_help)
    def list_all(ctx, as_json):
        found = ctx.api.get_all(resource.path)
        if as_json:
            output.emit_json(found)
        elif not found and resource.empty:
            click.echo(resource.empty)
        else:
            click.echo(output.table([header for header, _ in resource.columns],
                                    [[cell(item) for _, cell in resource.columns] for item in found]))

    if resource.show_help:
        @subcommand(group, "show", help=resource.show_help)
        @click.argument(resource.show_argument)
        def show(ctx, as_json, **ref):
            found = resource.find(ctx.api, ref[resource.show_argument])
            output.emit_json(found) if as_json else click.echo(resource.shown(found))

    if resource.delete_help:
        @subcommand(group, "delete", help=resource.delete_help)
        @click.argument(resource.show_argument)
        def delete(ctx, as_json, **ref):
            named = ref[resource.show_argument]
            ctx.api.delete(resource.path_of(named), not_found=resource.missing(named))
            output.emit_json({"deleted": named}) if as_json else click.echo(f"{resource.noun.capitalize()} {named} deleted.")

    return group
