"""The jobs' schedule-row and team columns are indexed where set only (jobs.0039): a dispatch's update
of a job's row is not HOT, and each index the row is in takes an entry, of a NULL too. What reads
them by those columns still reads them through an index: the foreign keys' own checks when a
schedule row or a team is deleted, a team's jobs, a member's jobs beside their own."""

import pytest
from django.db import connection

from jobs.actions.permissions import visible_jobs
from jobs.definitions.jobs import save_job
from jobs.models import Job
from jobs.models.job import NULL_MOSTLY
from tests.api_personas import make_personas

pytestmark = [pytest.mark.postgres("reads PostgreSQL's catalogue and plans"), pytest.mark.django_db]

SCHEDULES = [{"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"}, {"type": "interval", "every_seconds": 600},
             {"type": "once", "run_at": "2031-01-01T00:00:00Z"}]


def plan(sql, params=()):
    """The plan of ``sql`` with sequential scans priced out: an index that can serve it is used."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_each_is_indexed_where_set_only():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'jobs_job'")
        definitions = [row[0] for row in cursor.fetchall()]
    for name in NULL_MOSTLY:
        on_it = [d for d in definitions if d.endswith(f"({name}_id)") or f"({name}_id) WHERE" in d]
        assert on_it == [f"CREATE INDEX job_{name}_idx ON public.jobs_job USING btree ({name}_id) "
                         f"WHERE ({name}_id IS NOT NULL)"], on_it


def test_the_foreign_keys_checks_and_a_teams_jobs_read_them_by_index():
    people = make_personas()
    for n in range(30):
        save_job(Job(name=f"job-{n}", kind="callable", target="builtin.noop", owner=people.outsider,
                     group=people.team if n % 3 == 0 else None), SCHEDULES[n % 3])
    # The test's own: ten jobs on each schedule row, ten in the team (with the personas' nightly-report).
    rows = {"crontab": Job.objects.get(name="job-0").crontab, "interval": Job.objects.get(name="job-1").interval,
            "clocked": Job.objects.get(name="job-2").clocked, "group": people.team}
    expected = {"crontab": 10, "interval": 10, "clocked": 10, "group": 11}
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    for name in NULL_MOSTLY:
        # The check PostgreSQL runs for each deleted row a job points to, as a generic plan ($1).
        with connection.cursor() as cursor:
            cursor.execute(f"PREPARE fk_{name}(bigint) AS SELECT 1 FROM ONLY jobs_job x WHERE {name}_id = $1 "
                           "FOR KEY SHARE OF x")
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        try:
            assert f"job_{name}_idx" in plan(f"EXECUTE fk_{name}(%s)", [rows[name].pk]), name
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"DEALLOCATE fk_{name}")  # a session's, not the test transaction's
        # What Django's delete asks first (PROTECT, SET_NULL): the jobs of the row.
        sql, params = Job.objects.filter(**{name: rows[name]}).values("pk").query.sql_with_params()
        assert f"job_{name}_idx" in plan(sql, params), name
        assert Job.objects.filter(**{name: rows[name]}).count() == expected[name], name

    member_sees = visible_jobs(people.teammate)
    sql, params = member_sees.values("pk").query.sql_with_params()
    assert "job_group_idx" in plan(sql, params)
    assert set(member_sees.values_list("name", flat=True)) == {"nightly-report", *(f"job-{n}" for n in range(0, 30, 3))}
