"""HTTP calls, through the outbound guard: a literal internal address is refused when the job is
saved, a name that resolves inside when the attempt runs (outside JOBS_HTTP_ALLOWED_NETWORKS)."""

import json
import re

from django.conf import settings
from django.core.exceptions import ValidationError

import outbound

from ...access import secrets
from ...execution.output import first_bytes
from ...telemetry import tracing
from ..base import JobFailed, JobKindSpec, JobTimedOut, Outcome, result_as_json
from . import placeholders

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
# An RFC 9110 field name.
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Headers that frame the message or steer the connection: the client sets them, a job may not
# (a second Content-Length or a Transfer-Encoding smuggles a request past a proxy).
RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
                    "keep-alive", "proxy-connection", "proxy-authorization", "expect"}


def allowed_networks():
    return outbound.parse_networks(settings.JOBS_HTTP_ALLOWED_NETWORKS)


def header_errors(headers):
    if not isinstance(headers, dict):
        return "Must be a JSON object."
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.match(name):
            return f"{name!r} is not a valid header name."
        if name.lower() in RESERVED_HEADERS:
            return f"{name} is set by the client itself and may not be given."
        if not isinstance(value, str) or any(c in value for c in "\r\n\x00"):
            return f"{name}: the value must be text without line breaks."
    return None


def validate(job):
    errors = placeholders.errors(job)
    try:
        outbound.check_url(placeholders.checkable_url(job.target), allowed_networks())
    except outbound.Refused as exc:
        errors.setdefault("target", str(exc))
    if (job.http_method or "GET").upper() not in METHODS:
        errors["http_method"] = f"Must be one of {', '.join(sorted(METHODS))}."
    if problem := header_errors(job.http_headers):
        errors["http_headers"] = problem
    if isinstance(job.http_headers, dict) and isinstance(job.secret_http_headers, dict):
        both = {n.lower() for n in job.http_headers} & {n.lower() for n in job.secret_http_headers}
        if both:
            errors["secret_http_headers"] = f"Given in http_headers too: {', '.join(sorted(both))}."
    try:
        if problem := header_errors(secrets.reveal(job.secret_http_headers)):
            errors["secret_http_headers"] = problem
    except secrets.SecretsUnavailable as exc:
        errors["secret_http_headers"] = str(exc)
    codes = job.http_ok_statuses
    if not isinstance(codes, list) or not all(isinstance(c, int) and 100 <= c <= 599 for c in codes):
        errors["http_ok_statuses"] = "Must be a list of HTTP status codes (100-599)."
    if errors:
        raise ValidationError(errors)


def destination(job):
    return outbound.origin(placeholders.checkable_url(job.target)) if isinstance(job.target, str) else None


def execute(context):
    job = context.job
    try:
        hidden = secrets.reveal(job.secret_http_headers)
    except secrets.SecretsUnavailable as exc:
        raise JobFailed(str(exc)) from None
    # The run's trace goes on in the service called (traceparent, when traces are on); a header the
    # job sets itself wins.
    headers = {**tracing.inject({}), "Idempotency-Key": context.idempotency_key, **job.http_headers, **hidden}
    policy = outbound.Policy(allowed_networks=allowed_networks(), timeout=context.timeout_seconds,
                             max_bytes=settings.JOBS_HTTP_MAX_RESPONSE_BYTES, keep_bytes=settings.JOBS_OUTPUT_MAX_BYTES)
    try:
        body = placeholders.body(job, context.params)
        response = outbound.fetch((job.http_method or "GET").upper(), placeholders.url(job.target, context.params),
                                  headers=headers, body=body.encode() if body else None, policy=policy,
                                  sensitive_headers=hidden)
    except outbound.TimedOut:
        raise JobTimedOut(f"No answer within {job.timeout_seconds} s") from None
    except outbound.Refused as exc:
        raise JobFailed(f"Refused: {exc}") from None
    except outbound.UnsafeRequest as exc:
        raise JobFailed(f"Request failed: {exc}") from None
    ok = response.status in job.http_ok_statuses if job.http_ok_statuses else 200 <= response.status < 300
    output, result = stored_answer(response, settings.JOBS_OUTPUT_MAX_BYTES)
    if not ok:
        raise JobFailed(f"Unexpected status {response.status}", output, response.size)
    return Outcome(output=output, output_bytes=response.size, result=result)


def stored_answer(response, limit):
    """(output, result) of an answer, together at most ``limit`` bytes (as UTF-8 text and JSON).

    The status and headers are the result (the run page shows them above the body), the status
    line and the body the output. Cookies the server sets are not kept. Headers are kept whole, in
    order, up to a quarter of the limit (a server can send megabytes of them); the body takes the
    room left, its first bytes."""
    headers, dropped, used = {}, 0, 0
    for name, value in response.headers.items():
        if name.lower() == "set-cookie":
            continue
        size = len(json.dumps({name: value}, ensure_ascii=False).encode())
        if dropped or used + size > limit // 4:
            dropped += 1
            continue
        headers[name], used = value, used + size
    result = {"status": response.status, "headers": headers}
    if dropped:
        result["headers_not_kept"] = (f"{dropped} more header(s) not kept: headers are kept up to {limit // 4} bytes "
                                      "(a quarter of JOBS_OUTPUT_MAX_BYTES)")
    status_line = f"HTTP {response.status}\n"
    room = limit - len(json.dumps(result, ensure_ascii=False).encode()) - len(status_line)
    body = response.body.decode("utf-8", errors="replace")
    if response.size == len(response.body) and len(body.encode()) <= room:
        return status_line + body, result
    note = f"… [the body was {response.size} bytes; the rest not kept]"
    return status_line + first_bytes(body, room - len(note.encode()), note=False) + note, result


def result_text(result):
    """The status and headers of the answer, as the run page shows them above the body."""
    if not (isinstance(result, dict) and "status" in result):
        return result_as_json(result)
    lines = [f"HTTP {result['status']}"]
    lines += [f"{name}: {value}" for name, value in (result.get("headers") or {}).items()]
    return "\n".join(lines)


KIND = JobKindSpec(
    name="http", label="HTTP call", execute=execute, validate=validate,
    fields=("http_method", "http_headers", "secret_http_headers", "http_body", "http_ok_statuses"),
    secret_fields=("secret_http_headers",), destination=destination,
    field_options={"http_method": sorted(METHODS)}, result_title="Response", result_text=result_text,
    when_empty={"http_ok_statuses": "any 2xx"},
)
