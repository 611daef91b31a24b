"""Pages of runs, newest first, without counting them: each page starts after a position (the
created_at and id of a row it does not show) and reads one row more than it shows, to know whether
there is a next one. A page costs the same on the first page as on the thousandth, at 1,000 runs
as at 10,000,000 (an OFFSET reads every row it skips, a count every row there is)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Q
from django.db.models.expressions import RawSQL


@dataclass
class Page:
    items: list
    older: str | None  # the position to ask for the next older page, None on the oldest
    newer: str | None  # ... the next newer page, None on the newest

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def position(run):
    return f"{(run.created_at - EPOCH) // MICROSECOND}-{run.pk}"


def parse(text):
    """(created_at, id) of a position, None for anything else (the newest page then)."""
    micros, _, pk = (text or "").partition("-")
    if not (micros.isdigit() and pk.isdigit()):
        return None
    try:
        return EPOCH + int(micros) * MICROSECOND, int(pk)
    except OverflowError:
        return None


def page(runs, params, per_page, jobs=None):
    """The page of ``runs`` that ``params`` asks for: ``older=<position>`` (the runs before it),
    ``newer=<position>`` (the runs after it), or neither (the newest). ``jobs``: see ``first``."""
    if after := parse(params.get("newer")):
        created_at, pk = after
        later = Q(created_at__gte=created_at) & (Q(created_at__gt=created_at) | Q(created_at=created_at, pk__gt=pk))
        found = first(runs.filter(later), per_page + 1, newest=False, jobs=jobs)
        more = len(found) > per_page
        items = found[:per_page][::-1]
        return Page(items, position(items[-1]) if items else None, position(items[0]) if more and items else None)
    if before := parse(params.get("older")):
        created_at, pk = before
        # The plain bound on created_at is what the index scan starts from (the OR alone is a filter
        # over every newer run: half the table half the history back).
        runs = runs.filter(Q(created_at__lte=created_at) & (Q(created_at__lt=created_at) | Q(created_at=created_at,
                                                                                              pk__lt=pk)))
    found = first(runs, per_page + 1, jobs=jobs)
    items = found[:per_page]
    more = len(found) > per_page
    return Page(items, position(items[-1]) if more else None, position(items[0]) if before and items else None)


def first(runs, limit, newest=True, jobs=None):
    """The first ``limit`` of ``runs``, newest first (oldest first with ``newest=False``).

    ``jobs``, a queryset: the runs are those of these jobs only (a user who does not see every
    job). A plain ORDER BY ... LIMIT then either walks every run until enough are the user's, or
    reads every run of the user's jobs and sorts them: it grows with history. On PostgreSQL the
    runs are taken job by job instead, at most ``limit`` of each from its own index
    (run_job_recent_idx, run_job_unsuccessful_idx), and merged: bounded by the jobs and the limit."""
    order = ("-created_at", "-id") if newest else ("created_at", "id")
    if jobs is None or connection.vendor != "postgresql":
        return list(runs.order_by(*order)[:limit])
    ids = first_ids(runs, limit, newest, jobs)
    return list(runs.filter(pk__in=ids).order_by(*order)) if ids else []


def first_ids(runs, limit, newest=True, jobs=None):
    """The ids of ``first(runs, limit, newest, jobs)``, in its order."""
    order = ("-created_at", "-id") if newest else ("created_at", "id")
    if jobs is None or connection.vendor != "postgresql":
        return list(runs.order_by(*order).values_list("pk", flat=True)[:limit])
    direction = "DESC" if newest else "ASC"
    try:
        jobs_sql, jobs_params = jobs.order_by().values("pk").query.sql_with_params()
        each_sql, each_params = (runs.filter(job_id=RawSQL("j.id", ())).order_by(*order)
                                 .values_list("pk", "created_at")[:limit].query.sql_with_params())
    except EmptyResultSet:  # no job, or a filter nothing can match
        return []
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT r.id FROM ({jobs_sql}) AS j (id) CROSS JOIN LATERAL ({each_sql}) AS r (id, created_at) "
                       f"ORDER BY r.created_at {direction}, r.id {direction} LIMIT %s",
                       (*jobs_params, *each_params, limit))
        return [row[0] for row in cursor.fetchall()]
