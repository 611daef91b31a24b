"""The API reference: the OpenAPI schema the service serves at ``/api/schema/`` (drf-spectacular, the
same generator), written out as Markdown: every call with its parameters, request body and answers,
then every schema with its fields."""

import json

from . import from_django
from .markdown import cell

METHODS = ("get", "post", "put", "patch", "delete")


def schema():
    """The OpenAPI schema the service serves, made by drf-spectacular in a process with its settings."""
    return from_django.gathered()["schema"]


def _ref_name(ref):
    return ref.rsplit("/", 1)[-1]


def _anchor(name):
    return name.lower()


def type_of(spec):
    """A field's type in words, schemas as links to their section."""
    if not isinstance(spec, dict) or not spec:
        return "any JSON"
    if "$ref" in spec:
        name = _ref_name(spec["$ref"])
        return f"[{name}](#{_anchor(name)})"
    for combinator in ("allOf", "oneOf", "anyOf"):
        if combinator in spec:
            return " or ".join(type_of(part) for part in spec[combinator])
    kind = spec.get("type", "object" if "properties" in spec else "any JSON")
    if kind == "array":
        return f"list of {type_of(spec.get('items', {}))}"
    if "enum" in spec:
        return "one of " + ", ".join(f"`{value}`" for value in spec["enum"] if value not in ("", None))
    if kind == "object" and "additionalProperties" in spec:
        return f"object of {type_of(spec['additionalProperties'])}"
    if "format" in spec:
        return f"{kind} ({spec['format']})"
    return kind



def _body_schema(content):
    """The schema of a request or answer body (JSON preferred)."""
    if not content:
        return None
    media = content.get("application/json") or next(iter(content.values()))
    return media.get("schema")


def _operation(path, method, operation):
    lines = [f"### `{method.upper()} {path}`", ""]
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        for parameter in parameters:
            lines.append(f"| `{parameter['name']}` | {parameter['in']} | {cell(type_of(parameter.get('schema', {})))} "
                         f"| {'yes' if parameter.get('required') else 'no'} | {cell(parameter.get('description', ''))} |")
        lines.append("")
    body = operation.get("requestBody")
    if body:
        lines += [f"Request body: {type_of(_body_schema(body.get('content')) or {})}"
                  f"{'' if body.get('required') else ' (optional)'}.", ""]
    answers = []
    for status, answer in operation.get("responses", {}).items():
        described = _body_schema(answer.get("content"))
        answers.append(f"`{status}`" + (f" {type_of(described)}" if described else "")
                       + (f" ({answer['description']})" if answer.get("description") else ""))
    if answers:
        lines += ["Answers: " + "; ".join(answers) + ".", ""]
    return lines


def _component(name, spec):
    lines = [f"### {name}", ""]
    if spec.get("description"):
        lines += [spec["description"].strip(), ""]
    properties = spec.get("properties")
    if properties:
        required = set(spec.get("required", []))
        lines += ["| field | type | | meaning |", "|---|---|---|---|"]
        for field, field_spec in properties.items():
            flags = [flag for flag, on in (("required", field in required), ("read-only", field_spec.get("readOnly")),
                                           ("write-only", field_spec.get("writeOnly"))) if on]
            meaning = field_spec.get("description") or field_spec.get("title", "")
            if "default" in field_spec:
                meaning = f"{meaning} Default: `{json.dumps(field_spec['default'])}`.".strip()
            lines.append(f"| `{field}` | {cell(type_of(field_spec))} | {', '.join(flags)} | {cell(meaning)} |")
        lines.append("")
    elif "enum" in spec:
        lines += ["Values: " + ", ".join(f"`{value}`" for value in spec["enum"] if value not in ("", None)) + ".", ""]
    else:
        lines += [f"Type: {type_of(spec)}.", ""]
    return lines


def markdown(openapi=None):
    """The page, ``reference/api.md``."""
    openapi = openapi or schema()
    lines = [
        f"# API ({openapi['info']['title']} {openapi['info'].get('version', '')})".rstrip() + "",
        "",
        "Generated when the site is built from the OpenAPI schema the service serves at `/api/schema/`",
        "(its Swagger UI is at `/api/docs/`), so it is the API of this very code. Every call needs a login:",
        "`Authorization: Token <key>` (the pages' *API tokens* page, or `manage.py tokens create USER`) or a",
        "session. The [API guide](../guide/api.md) tells how the calls are used, who may make them and the quotas.",
        "",
        "## Calls",
        "",
    ]
    for path, item in openapi["paths"].items():
        for method in METHODS:
            if method in item:
                lines += _operation(path, method, item[method])
    lines += ["## Schemas", ""]
    for name, spec in openapi["components"]["schemas"].items():
        lines += _component(name, spec)
    return "\n".join(lines) + "\n"
