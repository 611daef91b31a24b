"""What a run and its attempts store of an attempt, each capped, whatever the executor handed over:
a job's output, result or error can be as large as the job makes it.

- ``output``: the last JOBS_OUTPUT_MAX_BYTES bytes (UTF-8), led by a line saying what was not kept;
- ``result``: its JSON when that is at most JOBS_OUTPUT_MAX_BYTES, else an object saying so, with
  the first JOBS_ERROR_MAX_BYTES of the JSON as a preview;
- ``error``: the first JOBS_ERROR_MAX_BYTES bytes (the message comes first);
- ``traceback``: the last JOBS_ERROR_MAX_BYTES bytes (the innermost frames and the exception).

PostgreSQL's text and jsonb cannot hold a NUL character (a command may well print one): each is
stored as U+FFFD, the replacement character, rather than the run being lost to the database's refusal.
"""

import json

from django.conf import settings

from ..execution.output import first_bytes, last_bytes

RESULT_NOT_KEPT = "result_not_kept"


def output(text):
    return _last(text, settings.JOBS_OUTPUT_MAX_BYTES)


def traceback(text):
    return _last(text, settings.JOBS_ERROR_MAX_BYTES)


def _last(text, most):
    """``text`` without NULs, or its last ``most`` bytes when longer."""
    text = without_nul(text)
    data = text.encode("utf-8", errors="replace")
    if len(data) <= most:
        return text
    return last_bytes(data, len(data), most)


def error(text, then=""):
    """``text`` capped, followed by ``then`` (within the cap)."""
    return first_bytes(without_nul(text), settings.JOBS_ERROR_MAX_BYTES - len(then.encode())) + then


def result(value):
    """``value`` when its JSON is at most JOBS_OUTPUT_MAX_BYTES; else what it was and its start."""
    if value is None or isinstance(value, bool | int | float):
        return value
    encoded = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in encoded:
        value = _json_without_nul(value)
        encoded = json.dumps(value, ensure_ascii=False)
    size = len(encoded.encode())
    if size <= settings.JOBS_OUTPUT_MAX_BYTES:
        return value
    return {RESULT_NOT_KEPT: f"The result was {size} bytes of JSON, more than JOBS_OUTPUT_MAX_BYTES "
                             f"({settings.JOBS_OUTPUT_MAX_BYTES}); its start follows.",
            "bytes": size, "preview": first_bytes(encoded, settings.JOBS_ERROR_MAX_BYTES)}


def without_nul(text):
    return text.replace("\x00", "\ufffd")


def _json_without_nul(value):
    if isinstance(value, str):
        return without_nul(value)
    if isinstance(value, dict):
        return {without_nul(key) if isinstance(key, str) else key: _json_without_nul(item)
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_without_nul(item) for item in value]
    return value
