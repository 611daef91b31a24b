"""An HTTP job's ``{{params.<name>}}`` placeholders, each filled with its run's value encoded for its
place: percent-encoded as one path segment in the URL's path (a ``/`` or ``..`` in a value stays
inside its segment), form-encoded in the query and the fragment, a JSON value in a JSON body,
form-encoded in a form body, as it is in any other body. The scheme, host and port take no
placeholder: a value never chooses where the request goes (the outbound guard checks the host
when the job is saved). Headers take none either (secret headers are never filled with values)."""

import json
import re
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

from ... import parameters

SAMPLE = "x"  # what a placeholder stands for while the URL is checked


def _path_segment(value):
    text = quote(parameters.as_text(value), safe="")
    return {".": "%2E", "..": "%2E%2E"}.get(text, text)


def _form(value):
    return quote_plus(parameters.as_text(value), safe="")


def _json(value):
    return json.dumps(value, ensure_ascii=False)


def _plain(value):
    return parameters.as_text(value)


def body_encoding(job):
    """How placeholders in the body are filled: "json", "form" or "text". From the Content-Type the
    job sends, or, with none, "json" when the body reads as JSON with each placeholder a value."""
    content_type = next((v for k, v in (job.http_headers or {}).items() if k.lower() == "content-type"), "")
    content_type = str(content_type).lower()
    if "json" in content_type:
        return "json"
    if "x-www-form-urlencoded" in content_type:
        return "form"
    if content_type:
        return "text"
    try:
        json.loads(parameters.fill(job.http_body, {}, lambda value: "null"))
    except ValueError:
        return "text"
    return "json"


def url(target, values):
    """The job's URL with its placeholders filled for their places."""
    parts = urlsplit(target)
    return urlunsplit((parts.scheme, parts.netloc, parameters.fill(parts.path, values, _path_segment),
                       parameters.fill(parts.query, values, _form), parameters.fill(parts.fragment, values, _form)))


def body(job, values):
    if not job.http_body:
        return job.http_body
    encode = {"json": _json, "form": _form, "text": _plain}[body_encoding(job)]
    return parameters.fill(job.http_body, values, encode)


def errors(job):
    """{field: message} for placeholders that name no declared parameter, or stand where a value
    may not (the scheme, host or port; a header)."""
    declared = parameters.declared_names(job.parameters)
    found = {}
    for field in ("target", "http_body"):
        unknown = sorted(parameters.placeholders(getattr(job, field) or "") - declared)
        if unknown:
            found[field] = (f"{{{{params.{unknown[0]}}}}} names no declared parameter "
                            f"(declared: {', '.join(sorted(declared)) or 'none'}).")
    if "target" not in found and parameters.placeholders(_before_path(job.target or "")):
        found["target"] = "A placeholder may stand in the URL's path, query or fragment, not its scheme, host or port."
    headers = job.http_headers if isinstance(job.http_headers, dict) else {}
    if any(parameters.placeholders(f"{name}{value}") for name, value in headers.items()):
        found["http_headers"] = "Headers take no {{params.…}} placeholder: put it in the URL or the body."
    return found


def _before_path(target):
    """The scheme, user, host and port of a URL as written (up to its path, query or fragment)."""
    scheme, sep, rest = target.partition("://")
    return scheme + sep + re.split(r"[/?#]", rest, maxsplit=1)[0] if sep else target


def checkable_url(target):
    """The URL as the outbound guard checks it when the job is saved: placeholders as a sample value."""
    return parameters.fill(target, {}, lambda value: SAMPLE)

