"""Filters shared by the API's views and the pages."""

from django.db import connection


def with_tag(jobs, tag):
    if connection.features.supports_json_field_contains:
        return jobs.filter(tags__contains=[tag])
    # SQLite has no JSON containment: match in Python on the (small) set of visible jobs.
    return jobs.filter(pk__in=[pk for pk, tags in jobs.values_list("pk", "tags") if tag in (tags or [])])
