"""The squashed migrations (docs/operations/deployment.md, Upgrading): a database migrated to the end of
the migrations they replace upgrades to them keeping its rows and its schema; one part of the way is
refused before anything changes; and they make the schema the replaced ones made."""

import hashlib
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

pytestmark = pytest.mark.postgres("reads PostgreSQL's catalogue; the replaced migrations were run on PostgreSQL")

SQUASHED_APPS = ("jobs", "notifications", "audit", "workflows")

# The fingerprint (schema_fingerprint) of the tables the replaced migrations made, on a new database
# migrated with them (the tree before the squash, 0e9a145); `pg_dump --schema-only` of that database
# and of one migrated with the squashed migrations were the same, line for line.
REPLACED_MIGRATIONS_SCHEMA = "b2c791c795f4f683fcb9170706f923120359e073101ffebf0056e7547d5f3a63"


def schema_fingerprint():
    """The squashed apps' tables as PostgreSQL has them: columns in order with their types, defaults
    and nullability, constraints, indexes, storage parameters."""
    tables = "^(" + "|".join(SQUASHED_APPS) + ")_"
    queries = [
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,
                  a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
           WHERE c.relkind = 'r' AND c.relname ~ %s AND a.attnum > 0 AND NOT a.attisdropped
           ORDER BY c.relname, a.attnum""",
        """SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k
           JOIN pg_class c ON c.oid = k.conrelid WHERE c.relname ~ %s ORDER BY 1, 2""",
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename ~ %s ORDER BY 1, 2",
        "SELECT relname, reloptions FROM pg_class WHERE relkind = 'r' AND relname ~ %s ORDER BY 1",
    ]
    with connection.cursor() as cursor:
        rows = []
        for query in queries:
            cursor.execute(query, [tables])
            rows.append(cursor.fetchall())
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def squashes():
    return {key: migration.replaces for key, migration in MigrationLoader(None).disk_migrations.items()
            if migration.replaces}


def as_the_release_before_left_it(replaced_count=None):
    """django_migrations as a database migrated with the replaced migrations has it (the first
    ``replaced_count`` of each app's only, when given), without the squashed ones. (Applying a squash
    records the migrations it replaces as well.)"""
    recorder = MigrationRecorder(connection)
    for key, replaced in squashes().items():
        for app, name in (key, *replaced):
            recorder.record_unapplied(app, name)
        for app, name in replaced[:replaced_count]:
            recorder.record_applied(app, name)


def test_the_squashed_migrations_make_the_schema_the_replaced_ones_made(db):
    executor = MigrationExecutor(connection)
    executor.migrate(list(squashes()))  # later migrations, once there are some, undone (the test's transaction)
    assert schema_fingerprint() == REPLACED_MIGRATIONS_SCHEMA


def test_a_database_at_the_end_of_the_replaced_migrations_upgrades_keeping_its_rows_and_schema(db):
    job = save_job(Job(name="nightly", kind="callable", target="builtin.noop"), {"type": "manual"})
    run = JobRun.objects.create(job=job, status=RunStatus.SUCCEEDED, scheduled_for=timezone.now())
    as_the_release_before_left_it()
    schema = schema_fingerprint()

    out = StringIO()
    call_command("migrate", skip_checks=False, stdout=out)

    assert "No migrations to apply." in out.getvalue()
    assert set(squashes()) <= set(MigrationRecorder(connection).applied_migrations())
    assert schema_fingerprint() == schema
    assert list(Job.objects.values_list("pk", "name")) == [(job.pk, "nightly")]
    assert list(JobRun.objects.values_list("pk", "job", "status")) == [(run.pk, job.pk, RunStatus.SUCCEEDED)]


def test_a_database_part_of_the_way_through_them_is_sent_to_the_release_before(db):
    as_the_release_before_left_it(replaced_count=2)  # workflows complete, the others at their 0002
    schema = schema_fingerprint()

    with pytest.raises(SystemCheckError) as refused:
        call_command("migrate", skip_checks=False, stdout=StringIO())

    assert "jobs migrations applied up to 0002_run_policies only" in str(refused.value)
    assert "Migrate with the release before this one first" in str(refused.value)
    assert "workflows" not in str(refused.value)
    assert schema_fingerprint() == schema
