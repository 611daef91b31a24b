"""The shape every jobsctl command shares: --json, and the Context (``cli.Context``: the settings
and the API client) passed in."""

import functools

import click

from . import output


def subcommand(group, name=None, **attrs):
    """A command of ``group`` with --json, receiving the Context and whether to answer in JSON
    (this --json, or the one before the command)."""
    def wrap(function):
        @group.command(name, **attrs)
        @click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
        @click.pass_obj
        @functools.wraps(function)
        def run(ctx, as_json, **kwargs):
            return function(ctx, as_json or ctx.json, **kwargs)
        return run
    return wrap


def switch(group, call, route, find, noun, **attrs):
    """``call`` (pause or resume) of ``group``: pauses or resumes the schedule of a job or a workflow
    (``noun``), named by name or id as ``find`` finds it, through the API's /api/<route>/<id>/<call>/."""
    @subcommand(group, call, **attrs)
    @click.argument(noun)
    def switched(ctx, as_json, **named):
        found = find(ctx.api, named[noun])
        output.switched(ctx.api.post(f"/api/{route}/{found['id']}/{call}/"), as_json, paused=call == "pause")
    return switched
