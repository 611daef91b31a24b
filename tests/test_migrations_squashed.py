"""The squashed migrations (docs/operations/deployment.md, Upgrading): they make the schema of the previous
release, d8a114e, whose migrations they replace; a database of that release upgrades to this one keeping
its rows, with this release's data migrations done and the schema a new database gets; one part of the
way through the replaced migrations is refused before anything changes."""

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

from audit import retention

pytestmark = pytest.mark.postgres("reads PostgreSQL's catalogue; the previous release was measured on PostgreSQL")

APPS = ("jobs", "notifications", "audit", "workflows", "sso")

# The fingerprint (schema_fingerprint) of a new database migrated with the files of d8a114e, the previous
# release. `pg_dump --schema-only` of that database and of one migrated to the squashes only were the same,
# line for line (PostgreSQL 15).
PREVIOUS_RELEASE_SCHEMA = "973c79311a2d50b503134cbbd6abac171633f85313010d34cc791235487120ac"


def schema_fingerprint():
    """The apps' tables as PostgreSQL has them: columns in order with their types, defaults and
    nullability, constraints, indexes, storage parameters."""
    tables = "^(" + "|".join(APPS) + ")_"
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


def to_the_previous_release():
    """Migrates back to the squashes (sso, new in this release, to nothing) and leaves django_migrations
    as d8a114e's ``migrate`` did: the replaced migrations applied, not the squashes. Returns the models
    of that state."""
    targets = [*squashes(), ("sso", None)]
    with connection.cursor() as cursor:  # this release's own entries (its groups'), which d8a114e had no subject for
        cursor.execute("DELETE FROM audit_auditentry")
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    recorder = MigrationRecorder(connection)
    for app, name in squashes():
        recorder.record_unapplied(app, name)
    return executor.loader.project_state(list(squashes())).apps


def back_to_the_end():
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_squashes_alone_make_the_schema_of_the_previous_release(db):
    to_the_previous_release()  # undone with the test's transaction
    assert schema_fingerprint() == PREVIOUS_RELEASE_SCHEMA


@pytest.mark.django_db(transaction=True)  # tables that took rows cannot be altered in the same transaction
def test_a_database_of_the_previous_release_upgrades_keeping_its_rows_and_doing_this_releases_data_migrations():
    new_database = schema_fingerprint()  # the test database: every migration, on nothing
    old = to_the_previous_release()
    try:
        # rows as d8a114e wrote them, with its models
        owner = old.get_model("auth", "User").objects.create(username="owner")
        job = old.get_model("jobs", "Job").objects.create(name="nightly", kind="callable", target="builtin.noop",
                                                          owner_id=owner.pk)
        run = old.get_model("jobs", "JobRun").objects.create(job=job, status="succeeded", scheduled_for=timezone.now())
        old.get_model("jobs", "Limit").objects.create(key="warehouse", max_running=1)
        old.get_model("jobs", "Calendar").objects.create(name="de-be")
        old.get_model("notifications", "Channel").objects.create(name="ops", kind="webhook", config={})
        entries = old.get_model("audit", "AuditEntry").objects
        for action in ("create", "run_now"):
            entries.create(action=action, subject="job", job=job, job_name=job.name, actor=owner,
                           actor_name="owner", source="api")

        out = StringIO()
        call_command("migrate", skip_checks=False, stdout=out)

        assert "Applying jobs.0031_team_ownership... OK" in out.getvalue()
        assert "squashed" not in out.getvalue()  # taken as applied, as the replaced migrations are
        assert set(squashes()) <= set(MigrationRecorder(connection).applied_migrations())
        assert schema_fingerprint() == new_database
        new = MigrationExecutor(connection).loader.project_state().apps
        assert list(new.get_model("jobs", "Job").objects.values_list("pk", "owner")) == [(job.pk, owner.pk)]
        assert list(new.get_model("jobs", "JobRun").objects.values_list("pk", "job", "status")) == [
            (run.pk, job.pk, "succeeded")]
        # jobs.0031, notifications.0008 (tests/security/test_teams.py has the rest): what existed before teams is shared
        assert list(new.get_model("jobs", "Limit").objects.values_list("key", "shared")) == [("warehouse", True)]
        assert list(new.get_model("jobs", "Calendar").objects.values_list("name", "shared")) == [("de-be", True)]
        assert list(new.get_model("notifications", "Channel").objects.values_list("name", "shared")) == [("ops", True)]
        # audit.0004: the entries written before the chain are chained
        assert list(new.get_model("audit", "AuditEntry").objects.filter(job=job.pk).order_by("id").values_list(
            "action", flat=True)) == ["create", "run_now"]
        verdict = retention.verify()
        assert verdict.ok, verdict.problem
        assert verdict.count >= 2
    finally:
        back_to_the_end()


def test_a_database_part_of_the_way_through_the_replaced_migrations_is_sent_to_the_previous_release(db):
    recorder = MigrationRecorder(connection)
    recorder.migration_qs.filter(app__in=APPS).delete()
    for replaced in squashes().values():  # as d8a114e's migrate left it after the first two of each app
        for app, name in replaced[:2]:
            recorder.record_applied(app, name)
    schema = schema_fingerprint()

    with pytest.raises(SystemCheckError) as refused:
        call_command("migrate", skip_checks=False, stdout=StringIO())

    assert "jobs migrations applied up to 0002_run_policies only" in str(refused.value)
    assert "Migrate with d8a114e, the previous release, first" in str(refused.value)
    assert "workflows" not in str(refused.value)
    assert schema_fingerprint() == schema
