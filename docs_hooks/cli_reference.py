"""The command-line reference: ``jobsctl --help`` and each of its commands' help, and the help of the
project's own ``manage.py`` commands and each of their actions, as the programs print them."""

from . import from_django


def jobsctl_helps():
    """[(command line, help)] of jobsctl and every command and group under it, in order."""
    return from_django.gathered()["jobsctl"]


def manage_helps():
    """{command: [(command line, help)]} of the project's own ``manage.py`` commands, each action included."""
    return from_django.gathered()["manage"]


def _fence(text):
    return ["```text", text.rstrip(), "```", ""]


def markdown():
    """The page, ``reference/cli.md``."""
    lines = [
        "# Command line",
        "",
        "Generated when the site is built from the programs' own help. `jobsctl` works from anywhere through",
        "the API ([its guide](../guide/command-line.md): installing it, its configuration and exit codes);",
        "`manage.py` runs on a host of the service, with its settings and its database, as the operator",
        "unless given `--as USER`.",
        "",
        "## jobsctl",
        "",
    ]
    for command_line, text in jobsctl_helps():
        lines += [f"### `{command_line}`", ""] + _fence(text)
    lines += ["## manage.py", "",
              "The project's own commands (Django's, such as `migrate` and `createsuperuser`, are Django's).", ""]
    for _name, pages in manage_helps().items():
        for command_line, text in pages:
            lines += [f"### `{command_line}`", ""] + _fence(text)
    return "\n".join(lines) + "\n"

