"""A job's editable fields, declared once with their groups: the API's serializer, the pages' job
form, the admin's fieldsets, the audit trail's snapshot and jobs-as-code are all built from
``FIELDS`` (each field with its group; ``GROUPS`` gathers them). A new setting of a job is its model
field (and migration) and its line here.

``schedule`` stands for the schedule object (the API's), which the forms edit as several fields.
The fields that belong to some kinds only (``KIND_FIELDS``) are in the "What" group; each kind
(``jobs.kinds``) says which of them it uses, and a form shows them for that kind only.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldGroup:
    title: str
    fields: tuple


KIND_FIELDS = (
    "args", "kwargs",
    "environment", "secret_environment", "working_directory",
    "memory_limit_mb", "cpu_limit_seconds", "max_open_files", "max_processes",
    "http_method", "http_headers", "secret_http_headers", "http_body", "http_ok_statuses",
    "grace_seconds",
)

WHAT, WHEN, RETRIES, ALERTS, ACCESS, HISTORY = "What", "When", "Retries and limits", "Alerts", "Access", "History"

# Each field with its group, in the order the API and jobs files give them.
FIELDS = (
    ("name", WHAT), ("description", WHAT), ("tags", ACCESS), ("kind", WHAT), ("target", WHAT), ("parameters", WHAT),
    ("args", WHAT), ("kwargs", WHAT), ("environment", WHAT), ("secret_environment", WHAT),
    ("http_method", WHAT), ("http_headers", WHAT), ("secret_http_headers", WHAT), ("http_body", WHAT),
    ("http_ok_statuses", WHAT), ("grace_seconds", WHAT),
    ("schedule", WHEN), ("catchup_policy", WHEN), ("catchup_max", WHEN), ("overlap_policy", WHEN),
    ("start_deadline_seconds", WHEN), ("jitter_seconds", WHEN), ("spread", WHEN),
    ("dst_skipped", WHEN), ("dst_repeated", WHEN),
    ("calendars", WHEN), ("business_days", WHEN), ("business_day_of_month", WHEN),
    ("memory_limit_mb", WHAT), ("cpu_limit_seconds", WHAT), ("max_open_files", WHAT), ("max_processes", WHAT),
    ("working_directory", WHAT),
    ("enabled", WHEN), ("queue", ACCESS), ("priority", ACCESS),
    ("limit_key", RETRIES), ("bundle", RETRIES),
    ("max_retries", RETRIES), ("retry_backoff_seconds", RETRIES), ("retry_backoff_max_seconds", RETRIES),
    ("retry_jitter", RETRIES), ("timeout_seconds", RETRIES), ("pause_after_failures", RETRIES),
    ("sla_seconds", ALERTS), ("min_duration_seconds", ALERTS),
    ("retention_days", HISTORY), ("retention_min_runs", HISTORY),
    ("owner", ACCESS), ("group", ACCESS),
)

EDITABLE = tuple(name for name, _ in FIELDS)
# Fields whose values the audit trail never records, only their keys: they hold secrets, or may.
PRIVATE_VALUES = ("environment", "secret_environment", "http_headers", "secret_http_headers")
GROUPS = tuple(FieldGroup(title, tuple(name for name, group in FIELDS if group == title))
               for title in (WHAT, WHEN, RETRIES, ALERTS, ACCESS, HISTORY))


def common(group):
    """The fields of ``group`` that every kind has."""
    return [name for name in group.fields if name not in KIND_FIELDS]
