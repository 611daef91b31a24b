"""Exit codes fit for scripts, and the one-line error that carries one."""

import click

OK = 0
RUN_FAILED = 1  # the run ended other than succeeded; slots: a slot is missing
USAGE = 2  # bad options or arguments, a bad configuration (click's usage errors are 2 too)
NOT_FOUND = 3  # no such job or run, or not yours to see
AUTH = 4  # no token, a token the server refuses, or an action you may not take
UNREACHABLE = 5  # the server cannot be reached or did not answer in time
REJECTED = 6  # the server refused the input: a bad value, a file with errors
WAIT_TIMED_OUT = 7  # run --wait or tail: the run had not finished within --timeout
SERVER_ERROR = 8  # the server failed (HTTP 5xx) or answered something that is not this API
INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it


class CliError(click.ClickException):
    """Printed as one line on stderr (``jobsctl: ...``); the process exits with ``code``."""

    def __init__(self, code, message):
        super().__init__(message)
        self.exit_code = code

    def show(self, file=None):
        click.echo(f"jobsctl: {self.format_message()}", err=True)
