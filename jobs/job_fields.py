"""A job's editable fields, declared once with their groups: the API's serializer, the pages' job
form, the admin's fieldsets, the audit trail's snapshot and jobs-as-code are all built from
``GROUPS``. A new setting of a job is its model field (and migration) and its line here.

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
)

GROUPS = (
    FieldGroup("What", ("name", "description", "kind", "target", *KIND_FIELDS)),
    FieldGroup("When", ("schedule", "enabled", "catchup_policy", "catchup_max", "overlap_policy",
                        "start_deadline_seconds", "jitter_seconds")),
    FieldGroup("Retries and limits", ("timeout_seconds", "max_retries", "retry_backoff_seconds",
                                      "retry_backoff_max_seconds", "retry_jitter")),
    FieldGroup("Alerts", ("sla_seconds",)),
    FieldGroup("Access", ("owner", "group", "tags", "queue", "priority")),
    FieldGroup("History", ("retention_days", "retention_min_runs")),
)

EDITABLE = tuple(name for group in GROUPS for name in group.fields)


def common(group):
    """The fields of ``group`` that every kind has."""
    return [name for name in group.fields if name not in KIND_FIELDS]
