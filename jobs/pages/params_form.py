"""The form the pages build from a job's parameters (run now, backfill): one input per declared
parameter, its values read from a POST as text and checked by the action (``jobs.parameters``, the
API's rule), whose errors come back on their parameter's input."""

from dataclasses import dataclass, field

from .. import parameters

PREFIX = "param-"  # the inputs' names: param-<parameter name>
# An HTML input for each type (a datetime is typed with its offset: datetime-local has none).
INPUTS = {"string": "text", "integer": "number", "number": "number", "date": "date", "datetime": "text"}


@dataclass
class ParamInput:
    name: str
    type: str
    widget: str  # text, number, date, select
    value: str
    required: bool
    description: str
    default: object
    choices: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    step: str = "1"
    placeholder: str = ""


def inputs(job, submitted=None, errors=None):
    """The inputs of ``job``'s parameters, filled with ``submitted`` (their texts, {name: text}) or
    the defaults, with ``errors`` ({name: [messages]}) on theirs."""
    made = []
    for parameter in job.parameters or []:
        name, kind, default = parameter["name"], parameter["type"], parameter["default"]
        value = (submitted or {}).get(name, "" if default is None else parameters.as_text(default))
        widget = "select" if kind in ("choice", "boolean") else INPUTS[kind]
        choices = (list(parameter["choices"]) if kind == "choice" else ["true", "false"] if kind == "boolean" else [])
        made.append(ParamInput(
            name=name, type=kind, widget=widget, value=value, choices=choices,
            required=parameter["required"] and default is None, description=parameter["description"],
            default=default, errors=(errors or {}).get(name, []), step="any" if kind == "number" else "1",
            placeholder="2026-11-01T09:00:00+01:00" if kind == "datetime" else ""))
    return made


def submitted(post):
    """{name: text} of the parameter inputs of a POST; an empty input is no value (the default applies)."""
    return {key.removeprefix(PREFIX): value for key, value in post.items()
            if key.startswith(PREFIX) and value.strip() != ""}


def split_errors(fields):
    """An ActionError's fields as ({parameter: [messages]}, [other messages])."""
    mine, other = {}, []
    for key, messages in fields.items():
        if key.startswith("params."):
            mine[key.removeprefix("params.")] = list(messages)
        else:
            other.extend(messages)
    return mine, other
