"""Run-time parameters: what a job declares (``Job.parameters``), the values a run is given, and how
each kind receives them.

A declaration is a list of ``{"name", "type", "default", "required", "description", "choices"}``;
``checked_declaration`` validates one and returns it normalised (every key present, each default
coerced to its type). ``resolve`` turns the values given to a run (the API's ``params``, the
command line's ``--param name=value``, a form, a workflow step) into the values recorded on the run
(``JobRun.params``): the defaults filled in, each value coerced to its type and stored as JSON.
A value may come as its JSON type or as text (the command line and forms give text).

Recorded values are JSON: a string, choice, date (``YYYY-MM-DD``) or datetime (ISO 8601 in UTC) as
a string, an integer, a number, a boolean. ``as_python`` gives a function its values as Python
objects (a ``date``, an aware ``datetime``), ``as_text`` a command's environment and an HTTP
placeholder theirs. An optional parameter with no default and no value is absent from the run.

Secrets are never parameters: a value is recorded on the run and shown on its page, in the API and
the audit trail. A name that reads like a secret (password, token…) or that a secret field of the
job uses is refused.
"""

import contextlib
import json
import keyword
import math
import re
from datetime import UTC, date, datetime

from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

TYPES = ("string", "integer", "number", "boolean", "date", "datetime", "choice")
KEYS = ("name", "type", "default", "required", "description", "choices")

MAX_PARAMETERS = 50
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1000
MAX_CHOICES = 100
MAX_CHOICE_LENGTH = 200
MAX_STRING_LENGTH = 4096  # one string value
MAX_VALUES_BYTES = 16 * 1024  # all of a run's values, as JSON
MAX_INTEGER = 2**53 - 1  # the largest integer every JSON reader keeps exactly

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Names a function kind gives itself (``context``) or that read as a secret's.
RESERVED_NAMES = {"context"}
SECRET_PARTS = {"pass", "passwd", "password", "passphrase", "pwd", "secret", "token", "apikey", "credential",
                "credentials", "auth", "authorization", "cookie", "session"}
SECRET_INSIDE = ("password", "secret", "token", "apikey", "api_key", "private_key", "credential")
INTEGER_TEXT = re.compile(r"^[+-]?\d{1,16}$")
DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TRUE_TEXTS, FALSE_TEXTS = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
# {{params.day}} in an HTTP job's URL or body (spaces inside the braces allowed).
PLACEHOLDER = re.compile(r"\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class Invalid(ValueError):
    """A value that does not fit its parameter; the message states the rule."""


def _error(errors, field="parameters"):
    return ValidationError({field: errors})


# --- declarations


def checked_declaration(declared, secret_names=()):
    """``declared`` validated and normalised; a ValidationError on ``parameters`` listing each
    problem, the parameter named in each. ``secret_names``: names of the job's secret fields
    (secret environment variables, secret headers), which no parameter may take."""
    if declared in (None, ""):
        return []
    if not isinstance(declared, list):
        raise _error(["Must be a JSON list of parameters, each an object with at least a name and a type."])
    if len(declared) > MAX_PARAMETERS:
        raise _error([f"At most {MAX_PARAMETERS} parameters."])
    secrets = {_folded(name) for name in secret_names}
    errors, normalised, seen = [], [], set()
    for index, item in enumerate(declared):
        where = f"parameters[{index}]"
        if not isinstance(item, dict):
            errors.append(f"{where}: must be an object with a name and a type.")
            continue
        name = item.get("name")
        if isinstance(name, str) and NAME.match(name):
            where = f"'{name}'"
        if unknown := sorted(set(item) - set(KEYS), key=str):
            errors.append(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; a parameter has {', '.join(KEYS)}.")
            continue
        problem = _name_problem(name, seen, secrets)
        if problem:
            errors.append(f"{where}: {problem}")
            continue
        seen.add(name.lower())
        try:
            normalised.append(_checked_parameter(item))
        except Invalid as exc:
            errors.append(f"{where}: {exc}")
    if errors:
        raise _error(errors)
    return normalised


def _folded(name):
    return str(name).lower().replace("-", "_")


def _name_problem(name, seen, secrets):
    if not isinstance(name, str) or not name:
        return "needs a name."
    if len(name) > MAX_NAME_LENGTH or not NAME.match(name) or keyword.iskeyword(name):
        return (f"the name must be an identifier (letters, digits and _, not starting with a digit, not a Python "
                f"keyword), at most {MAX_NAME_LENGTH} characters.")
    if name in RESERVED_NAMES:
        return f"the name {name} is reserved (a function job receives its run's context under it)."
    if name.lower() in seen:
        return "the name is declared twice (names differing only in case count as one: JOB_PARAM_ upper-cases them)."
    if looks_secret(name) or _folded(name) in secrets:
        return ("secrets are never parameters: their values are recorded on the run and shown. Keep a secret in "
                "secret_environment or secret_http_headers and give the parameter another name.")
    return None


def looks_secret(name):
    folded = _folded(name)
    return bool(set(folded.split("_")) & SECRET_PARTS) or any(word in folded for word in SECRET_INSIDE)


def _checked_parameter(item):
    kind = item.get("type")
    if kind not in TYPES:
        raise Invalid(f"type must be one of {', '.join(TYPES)}.")
    required = item.get("required", False)
    if not isinstance(required, bool):
        raise Invalid("required must be true or false.")
    description = item.get("description") or ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_LENGTH or "\x00" in description:
        raise Invalid(f"description must be text of at most {MAX_DESCRIPTION_LENGTH} characters.")
    choices = item.get("choices") or []
    if kind == "choice":
        if (not isinstance(choices, list) or not choices or len(choices) > MAX_CHOICES
                or not all(isinstance(c, str) and c and len(c) <= MAX_CHOICE_LENGTH and "\x00" not in c
                           for c in choices)):
            raise Invalid(f"a choice needs choices: a list of 1 to {MAX_CHOICES} texts of at most "
                          f"{MAX_CHOICE_LENGTH} characters.")
        if len(set(choices)) != len(choices):
            raise Invalid("choices are listed twice.")
    elif choices:
        raise Invalid(f"choices are for the choice type only, not {kind}.")
    parameter = {"name": item["name"], "type": kind, "default": None, "required": required,
                 "description": description, "choices": list(choices)}
    default = item.get("default")
    if default is not None:
        try:
            parameter["default"] = coerce(parameter, default)
        except Invalid as exc:
            raise Invalid(f"the default does not fit: {exc}") from None
    return parameter


def declared_names(declared):
    """The names in a declaration, however well formed (for checks that run beside its own)."""
    if not isinstance(declared, list):
        return set()
    return {item["name"] for item in declared if isinstance(item, dict) and isinstance(item.get("name"), str)}


def defaults(declared):
    """The values of a run given none: each parameter's default (scheduled runs)."""
    return {p["name"]: p["default"] for p in declared or [] if p.get("default") is not None}


def missing_defaults(declared):
    """The required parameters without a default: a run given no values cannot have them."""
    return [p["name"] for p in declared or [] if p.get("required") and p.get("default") is None]


# --- values


def coerce(parameter, value):
    """``value`` (its JSON type, or text) as the parameter's stored JSON value; Invalid if it does not fit."""
    kind = parameter["type"]
    if value is None:
        raise Invalid("no value (null) given.")
    if kind in ("string", "choice"):
        if not isinstance(value, str):
            raise Invalid("must be text.")
        if "\x00" in value:
            raise Invalid("must not contain NUL characters.")
        if len(value) > MAX_STRING_LENGTH:
            raise Invalid(f"at most {MAX_STRING_LENGTH} characters (got {len(value)}).")
        if kind == "choice" and value not in parameter["choices"]:
            raise Invalid(f"must be one of {', '.join(parameter['choices'])}.")
        return value
    if kind == "integer":
        if isinstance(value, str) and INTEGER_TEXT.match(value.strip()):
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid("must be a whole number.")
        if abs(value) > MAX_INTEGER:
            raise Invalid(f"must be between -{MAX_INTEGER} and {MAX_INTEGER}.")
        return value
    if kind == "number":
        if isinstance(value, str) and len(value) <= 64:
            with contextlib.suppress(ValueError):
                value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid("must be a number.")
        if isinstance(value, int) and abs(value) > MAX_INTEGER:
            raise Invalid(f"must be between -{MAX_INTEGER} and {MAX_INTEGER}.")
        value = float(value)
        if not math.isfinite(value):
            raise Invalid("must be a finite number.")
        return value
    if kind == "boolean":
        if isinstance(value, str) and value.strip().lower() in TRUE_TEXTS | FALSE_TEXTS:
            return value.strip().lower() in TRUE_TEXTS
        if not isinstance(value, bool):
            raise Invalid("must be true or false.")
        return value
    if kind == "date":
        try:
            if isinstance(value, str) and DATE_TEXT.match(value):
                return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
        raise Invalid("must be a date, YYYY-MM-DD (such as 2026-11-01).")
    if kind == "datetime":
        moment = None
        if isinstance(value, str) and len(value) <= 64:
            try:
                moment = parse_datetime(value.strip())
            except ValueError:
                moment = None
        if moment is None:
            raise Invalid("must be an ISO 8601 date and time with a UTC offset (such as 2026-11-01T09:00:00+01:00).")
        if moment.tzinfo is None:
            raise Invalid("must include a UTC offset or Z (such as 2026-11-01T09:00:00Z).")
        try:
            return moment.astimezone(UTC).isoformat()
        except OverflowError:
            raise Invalid("is out of the range of dates.") from None
    raise Invalid(f"has an unknown type {kind!r}.")


def resolve(declared, given, field="params"):
    """The values a run records: ``given`` ({name: value}, or None) checked against the declaration,
    coerced, the defaults filled in. A ValidationError keyed ``<field>.<name>`` per bad value (an
    unknown parameter, a missing required one, one that does not fit its type), or keyed ``<field>``
    when ``given`` is not an object or the values are too large together."""
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise ValidationError({field: ["Must be an object of parameter names to values."]})
    by_name = {p["name"]: p for p in declared or []}
    errors, values = {}, {}
    for name, value in given.items():
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            errors[f"{field}.{name}"[:200]] = [f"Unknown parameter {str(name)[:100]!r}: the job declares {known}."]
            continue
        if value is None:  # null: as if not given (the default applies)
            continue
        try:
            values[name] = coerce(by_name[name], value)
        except Invalid as exc:
            errors[f"{field}.{name}"] = [f"{name} {exc}"]
    for name, parameter in by_name.items():
        if name in values or f"{field}.{name}" in errors:
            continue
        if parameter["default"] is not None:
            values[name] = parameter["default"]
        elif parameter["required"]:
            errors[f"{field}.{name}"] = [f"{name} is required: give it a value (it has no default)."]
    if errors:
        raise ValidationError(errors)
    if len(json.dumps(values, ensure_ascii=False).encode()) > MAX_VALUES_BYTES:
        raise ValidationError({field: [f"The values are larger than {MAX_VALUES_BYTES // 1024} KB together."]})
    return {name: values[name] for name in by_name if name in values}  # in the declaration's order


def filter_values(declared, wanted, field="param"):
    """``wanted`` ({name: text}, a runs list's filters) as the values runs record, each typed by
    its declared parameter; a ValidationError keyed ``<field>.<name>`` for an undeclared name or a
    value that does not fit."""
    by_name = {p["name"]: p for p in declared or []}
    errors, values = {}, {}
    for name, text in wanted.items():
        if name not in by_name:
            errors[f"{field}.{name}"[:200]] = [f"The job declares no parameter {str(name)[:100]!r} "
                                               f"(it declares {', '.join(by_name) or 'none'})."]
            continue
        try:
            values[name] = coerce(by_name[name], text)
        except Invalid as exc:
            errors[f"{field}.{name}"] = [f"{name} {exc}"]
    if errors:
        raise ValidationError(errors)
    return values


def parse_assignments(texts, field="params"):
    """``["day=2026-11-01", ...]`` (``--param``, a query) as {name: text}; a ValidationError for a
    text without ``=``."""
    values = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ValidationError({field: [f"{text!r}: give name=value."]})
        values[name.strip()] = value
    return values


# --- how the kinds receive them


def as_python(declared, values):
    """The run's values as a function gets them: a date as a ``date``, a datetime as an aware
    ``datetime``, the rest as recorded."""
    types = {p["name"]: p["type"] for p in declared or []}
    python = {}
    for name, value in (values or {}).items():
        kind = types.get(name)
        if kind == "date" and isinstance(value, str):
            value = date.fromisoformat(value)
        elif kind == "datetime" and isinstance(value, str):
            value = datetime.fromisoformat(value)
        python[name] = value
    return python


def as_text(value):
    """A recorded value as text: a command's environment variable, an HTTP placeholder."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return json.dumps(value)
    return "" if value is None else str(value)


def environment(values):
    """{JOB_PARAM_<NAME>: text} of a run's values: a command reads them from its environment."""
    return {env_name(name): as_text(value) for name, value in (values or {}).items()}


def env_name(name):
    return f"JOB_PARAM_{name.upper()}"


def placeholders(text):
    """The parameter names that ``{{params.<name>}}`` placeholders in ``text`` refer to."""
    return set(PLACEHOLDER.findall(text or ""))


def fill(text, values, encode):
    """``text`` with each placeholder replaced by ``encode(value)`` (``None`` for an optional
    parameter given no value)."""
    return PLACEHOLDER.sub(lambda m: encode((values or {}).get(m.group(1))), text or "")
