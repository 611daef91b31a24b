"""The job form's run-time parameters as rows (name, type, default, required, description, choices)
instead of a JSON text: read from and written to the API's JSON list of declarations (``jobs.parameters``),
which the serializer checks as it checks the API's. A default is typed as text, as a run's value is
(the API takes either); choices are separated by commas."""

from .. import parameters

PARTS = ("name", "type", "default", "required", "description", "choices")
REQUIRED = "required"  # the required select's value (its other: "", optional)


def from_api(declared):
    """The rows of the API's declarations."""
    return [{"name": item.get("name", ""), "type": item.get("type", ""),
             "default": parameters.as_text(item.get("default")),
             "required": REQUIRED if item.get("required") else "", "description": item.get("description") or "",
             "choices": ", ".join(item.get("choices") or [])} for item in declared or []]


def from_post(post, name="parameters"):
    """The rows as typed (a row with nothing typed but its type is no row)."""
    columns = [post.getlist(f"{name}-{part}") for part in PARTS]
    rows = [dict(zip(PARTS, values, strict=True)) for values in zip(*columns, strict=False)]
    return [row for row in rows if any(row[part].strip() for part in PARTS if part not in ("type", "required"))]


def to_api(rows):
    """The API's JSON list of the rows."""
    return [{"name": row["name"].strip(), "type": row["type"], "required": row["required"] == REQUIRED,
             "description": row["description"].strip(),
             "choices": [choice.strip() for choice in row["choices"].split(",") if choice.strip()],
             "default": row["default"] if row["default"] != "" else None} for row in rows]


def type_choices():
    return [(kind, kind) for kind in parameters.TYPES]
