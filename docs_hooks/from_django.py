"""What the reference pages need from the code, read in a process with the service's settings loaded: the
OpenAPI schema (as ``manage.py spectacular`` makes it), the help of the project's ``manage.py`` commands
and jobsctl's. One
process of its own, with a throwaway configuration: the pages depend on the code, not on a
deployment's secrets, and the docs build never loads Django itself."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WIDTH = 100


class Failed(RuntimeError):
    pass


def project_commands():
    """The names of the project's own management commands (not Django's or the libraries')."""
    return sorted(path.stem for path in REPO.glob("*/management/commands/*.py") if not path.name.startswith("_"))


@cache
def gathered():
    """{"schema": the OpenAPI schema, "manage": {command: [(command line, help)]}, "jobsctl": [(command line,
    help)]}."""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "SECRET_KEY": "docs-build-only", "DATABASE_URL": f"sqlite:///{folder}/none.sqlite3",
               "VAR_DIR": folder, "COLUMNS": str(WIDTH), "LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO),
               "DJANGO_SETTINGS_MODULE": "scheduler_site.settings"}
        for name in ("JOBS_SECRETS_KEYS", "METRICS_TOKEN", "CELERY_BROKER_URL", "CELERY_SENTINEL_MASTER_NAME"):
            env.pop(name, None)
        result = subprocess.run([sys.executable, "-m", "docs_hooks.from_django"], cwd=REPO, env=env,
                                capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise Failed(f"reading the API schema and the commands' help failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def _here():
    import django

    django.setup()
    from django.core.management import get_commands, load_command_class
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True),
                                                     renderer_context={}))
    known = get_commands()
    helps = {}
    for name in project_commands():
        helps[name] = _parser_helps(load_command_class(known[name], name).create_parser("manage.py", name),
                                    f"manage.py {name}")
    return {"schema": schema, "manage": helps, "jobsctl": _jobsctl_helps()}


def _parser_helps(parser, title):
    """(title, help) of ``parser`` and of each of its subcommands, theirs too (``jobs import crontab``)."""
    pages = [(title, parser.format_help())]
    for action in parser._actions:  # argparse keeps its subparsers here; it has no public accessor
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                pages += _parser_helps(subparser, f"{title} {sub}")
    return pages


def _jobsctl_helps():
    import click

    from jobsctl.cli import cli

    found = []

    def walk(command, context):
        found.append((context.command_path, command.get_help(context)))
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                walk(sub, click.Context(sub, info_name=name, parent=context, terminal_width=WIDTH,
                                        max_content_width=WIDTH))

    walk(cli, click.Context(cli, info_name="jobsctl", terminal_width=WIDTH, max_content_width=WIDTH))
    return found


if __name__ == "__main__":
    print(json.dumps(_here()))
