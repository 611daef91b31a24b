"""Jobs from a crontab file (``manage.py jobs import crontab FILE``), read as cron reads it:

- ``NAME=value`` lines (quotes around the value dropped) are the environment of the lines after
  them; ``CRON_TZ`` is the zone of the lines after it, ``SHELL`` the shell their commands run in,
  ``MAILTO`` where their output is mailed: an email channel, and a rule for each job on its failed,
  timed-out and lost runs (cron mails any output; the service sends what went wrong).
- ``@yearly``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly`` are their five
  fields; ``@reboot`` has no equivalent and is refused.
- In the command, the first ``%`` not escaped (``\\%``) ends it: the rest is its standard input, each
  further ``%`` a new line. The job's command pipes that text in.

Each line is a command job named after its command (``PREFIX-<words>-<digest>``), so the same line
imported again is the same job. A line cron cannot read is an error naming it, and nothing is
imported.
"""

import hashlib
import re
import shlex

from django.core.exceptions import ValidationError

from ...timing import schedules
from . import Import, Row, existing_channels, has_channels

TAG = "crontab"
ENVIRONMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAIL_EVENTS = ["failed", "timed_out", "lost"]
NAME_WORDS = 40


def read(text, actor, zone=None, prefix="cron"):
    """The ``Import`` of a crontab's ``text``; ``zone`` is that of the lines before any CRON_TZ (UTC when None)."""
    imported = Import()
    environment, mailto, shell, names, defaulted = {}, None, None, {}, False
    if zone is not None:
        try:
            schedules.validate_timezone(zone)
        except ValidationError as exc:
            imported.errors.append(f"--timezone: {' '.join(exc.messages)}")
    channels = existing_channels(actor) if has_channels() else set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if (found := ENVIRONMENT.match(raw)) and not line.startswith("@"):
            name, value = found.group(1), unquoted(found.group(2))
            if name == "CRON_TZ":
                try:
                    schedules.validate_timezone(value)
                except ValidationError as exc:
                    imported.errors.append(f"line {number}: CRON_TZ: {' '.join(exc.messages)}")
                zone = value
            elif name == "MAILTO":
                mailto = value
            elif name == "SHELL":
                shell = value
            environment[name] = value
            continue
        row = Row(f"line {number}")
        imported.rows.append(row)
        parsed = schedule_and_command(line, number, row, imported.errors)
        if parsed is None:
            continue
        cron, given = parsed
        defaulted = defaulted or zone is None
        command, stdin = split_at_percent(given)
        name = job_name(prefix, command, names)
        row.job = name
        entry = {
            "name": name,
            "kind": "command",
            "target": target_of(command, stdin, shell),
            "schedule": {"type": "cron", "cron": cron, "timezone": zone or "UTC"},
            "tags": [TAG],
            "description": f"Line {number} of a crontab: {line}"[:2000],
        }
        row.carried.append(f"{cron} in {zone or 'UTC'}" + (f" ({line.split()[0]})" if line.startswith("@") else ""))
        if environment:
            entry["environment"] = dict(environment)
            row.carried.append(f"environment {', '.join(environment)}")
        if stdin is not None:
            row.carried.append("standard input from %")
        if shell and shell != "/bin/sh":
            row.carried.append(f"SHELL {shell}: the command runs in it")
        imported.add("jobs", entry, number)
        mail(imported, row, mailto, channels, number)
    if not imported.rows:
        imported.errors.append("The file holds no crontab line.")
    imported.notes.append(
        "Cron puts no time limit on a command; each job has the service's default timeout "
        "(timeout_seconds): raise it where a command runs longer."
    )
    if defaulted:
        imported.notes.append(
            "Lines before any CRON_TZ are read in UTC (--timezone): cron reads them in its host's zone."
        )
    imported.keep_existing()
    return imported


def unquoted(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def schedule_and_command(line, number, row, errors):
    """(the five fields, the command) of a crontab line; None when it is refused or wrong."""
    if line.startswith("@"):
        word, *rest = line.split(None, 1)
        command = rest[0] if rest else ""
        if word == "@reboot":
            row.refused = "@reboot runs when cron starts, which is no schedule: run the command from the host's start."
            return None
        if word not in NICKNAMES or not command:
            errors.append(
                f"line {number}: {word!r} is not one of {', '.join([*NICKNAMES, '@reboot'])} followed by "
                f"a command: {line}"
            )
            return None
        return NICKNAMES[word], command
    fields = line.split(None, 5)
    if len(fields) < 6:
        errors.append(f"line {number}: a crontab line is five time fields and a command: {line}")
        return None
    cron = " ".join(fields[:5])
    try:
        if "H" in cron:
            raise ValidationError(f"'{cron}': cron has no H.")
        schedules.validate_cron(cron)
    except ValidationError as exc:
        errors.append(f"line {number}: {' '.join(exc.messages)}: {line}")
        return None
    return cron, fields[5]


def split_at_percent(given):
    """(the command, its standard input or None), as cron splits a line's command at ``%``."""
    command, stdin, escaped = [], None, False
    part = command
    for char in given:
        if escaped:
            if char != "%":
                part.append("\\")
            part.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            if stdin is None:
                stdin = []
                part = stdin
            else:
                part.append("\n")
        else:
            part.append(char)
    if escaped:
        part.append("\\")
    return "".join(command), None if stdin is None else "".join(stdin)


def target_of(command, stdin, shell):
    if shell and shell != "/bin/sh":
        command = f"exec {shlex.quote(shell)} -c {shlex.quote(command)}"
    if stdin is None:
        return command
    return f"printf '%s' {shlex.quote(stdin)} | (\n{command}\n)"


def job_name(prefix, command, names):
    words = re.sub(r"[^a-z0-9]+", "-", command.lower()).strip("-")[:NAME_WORDS].strip("-") or "command"
    name = f"{prefix}-{words}-{hashlib.sha256(command.encode()).hexdigest()[:6]}"
    names[name] = names.get(name, 0) + 1
    return name if names[name] == 1 else f"{name}-{names[name]}"


def mail(imported, row, mailto, channels, number):
    if mailto is None:
        row.lost.append("no MAILTO: cron mails the output to the crontab's owner, a local mailbox.")
        return
    if not mailto.strip():
        return
    if not has_channels():
        row.lost.append(f"MAILTO {mailto}: the notifications app is not installed.")
        return
    recipients = [address.strip() for address in mailto.split(",") if address.strip()]
    channel = f"mail {', '.join(recipients)}"
    if channel not in channels:
        channels.add(channel)
        imported.add("channels", {"name": channel, "kind": "email", "config": {"recipients": recipients}}, number)
    imported.add("rules", {"channel": channel, "events": MAIL_EVENTS, "scope": "job", "job": row.job}, number)
    row.carried.append(
        f"MAILTO {mailto}: the email channel {channel!r}, on failed, timed-out and lost runs (cron mails any output)"
    )
