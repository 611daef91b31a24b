from urllib.parse import urlparse

import requests
from django.conf import settings
from django.core.exceptions import ValidationError

from . import JobFailed, JobTimedOut, Outcome

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}


def validate(job):
    errors = {}
    parsed = urlparse(job.target)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        errors["target"] = "Must be an http:// or https:// URL."
    if (job.http_method or "GET").upper() not in METHODS:
        errors["http_method"] = f"Must be one of {', '.join(sorted(METHODS))}."
    if not isinstance(job.http_headers, dict):
        errors["http_headers"] = "Must be a JSON object."
    codes = job.http_ok_statuses
    if not isinstance(codes, list) or not all(isinstance(c, int) and 100 <= c <= 599 for c in codes):
        errors["http_ok_statuses"] = "Must be a list of HTTP status codes (100-599)."
    if errors:
        raise ValidationError(errors)


def execute(context):
    job = context.job
    headers = {"Idempotency-Key": context.idempotency_key, **job.http_headers}
    try:
        response = requests.request(
            (job.http_method or "GET").upper(), job.target, headers=headers,
            data=job.http_body.encode() if job.http_body else None,
            timeout=context.timeout_seconds, stream=True,
        )
    except requests.Timeout:
        raise JobTimedOut(f"No answer within {job.timeout_seconds} s") from None
    except requests.RequestException as exc:
        raise JobFailed(f"Request failed: {exc}") from None
    limit = settings.JOBS_OUTPUT_MAX_BYTES
    body = response.raw.read(limit + 1, decode_content=True) or b""
    response.close()
    output = f"HTTP {response.status_code}\n" + body[:limit].decode("utf-8", errors="replace")
    ok = response.status_code in job.http_ok_statuses if job.http_ok_statuses else 200 <= response.status_code < 300
    if not ok:
        raise JobFailed(f"Unexpected status {response.status_code}", output, len(body))
    return Outcome(output=output, output_bytes=len(body), result={"status": response.status_code})
