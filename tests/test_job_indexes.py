"""The jobs' schedule-row and team columns are indexed where set only (jobs.0039): a dispatch's update
of a job's row is not HOT, and each index the row is in takes an entry, of a NULL too. What reads
them by those columns still reads them through an index: the foreign keys' own checks when a
schedule row or a team is deleted, a team's jobs, a member's jobs beside their own. And (jobs.0040)
no index holds what nothing needs of it: the ping URL's key only where set, still unique; the
forecast's cron index only the enabled cron jobs; the next slot only in the scheduler's index; no
pattern index on the name."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.actions.permissions import visible_jobs
from jobs.definitions.jobs import save_job
from jobs.models import Job
from jobs.models.job import NULL_MOSTLY
from jobs.operations import forecast
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


def index_definitions(column):
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs_job'")
        return {name: definition for name, definition in cursor.fetchall() if f"({column})" in definition
                or f"({column}," in definition or f", {column})" in definition}


def test_a_ping_key_is_unique_where_set_and_finds_its_job_by_index():
    assert index_definitions("ping_key") == {"job_ping_key_unique": "CREATE UNIQUE INDEX job_ping_key_unique ON "
                                             "public.jobs_job USING btree (ping_key) WHERE (ping_key IS NOT NULL)"}
    first, second = (save_job(Job(name=name, kind="checkin", target="box"), SCHEDULES[0]) for name in ("a", "b"))
    plain = [save_job(Job(name=f"plain-{n}", kind="callable", target="builtin.noop"), SCHEDULES[n % 3]) for n in range(3)]
    assert first.ping_key and second.ping_key and first.ping_key != second.ping_key
    assert [job.ping_key for job in plain] == [None, None, None]
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=second.pk).update(ping_key=first.ping_key)
    sql, params = Job.objects.filter(ping_key=first.ping_key).values("pk").query.sql_with_params()
    assert "job_ping_key_unique" in plan(sql, params)
    assert list(Job.objects.filter(ping_key=first.ping_key).values_list("name", flat=True)) == ["a"]


def test_the_forecast_reads_a_peaks_cron_jobs_by_the_cron_index_which_holds_only_them():
    assert set(index_definitions("crontab_id")) == {"job_crontab_idx", "job_cron_offset_idx"}
    assert index_definitions("crontab_id")["job_cron_offset_idx"].endswith(
        "(crontab_id, spread_offset_seconds) WHERE (enabled AND ((schedule_type)::text = 'cron'::text))")
    for n in range(12):
        save_job(Job(name=f"job-{n}", kind="callable", target="builtin.noop", spread=3600 if n % 2 else 0),
                 SCHEDULES[n % 3])
    now = timezone.now()
    jobs = Job.objects.all()
    [group] = [g for g in forecast.cron_groups(jobs.filter(enabled=True), now, now + timedelta(days=1))
               if g.key[-1] == 0]
    with CaptureQueriesContext(connection) as queries:
        listed = forecast.jobs_of(jobs.filter(enabled=True), group, now, 10)
    assert sorted(name for _, name in listed) == sorted(
        f"job-{n}" for n in range(0, 12, 3) if Job.objects.get(name=f"job-{n}").spread_offset_seconds < 60)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    assert "job_cron_offset_idx" in plan(queries.captured_queries[-1]["sql"])


def test_the_next_slot_is_indexed_for_the_scheduler_only():
    assert list(index_definitions("next_run_at")) == ["job_due_idx"]


def test_a_jobs_name_is_indexed_by_its_uniqueness_only():
    assert list(index_definitions("name").values()) == [
        "CREATE UNIQUE INDEX jobs_job_name_key ON public.jobs_job USING btree (name)"]
    save_job(Job(name="only-one", kind="callable", target="builtin.noop"), SCHEDULES[1])
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(name="only-one", kind="callable", target="builtin.noop")
