"""Fewer index entries a run (issue 46): a dispatch's update of a job's row is not a HOT one
(next_run_at is indexed), so every index the row is in takes a new entry each run. Four of them
held entries no query needs:

- the ping URL's key was unique over every job, a NULL for each one that is not a check-in: it is
  now unique where set (job_ping_key_unique);
- the forecast's cron index held every enabled job, of any schedule: it now holds the enabled cron
  jobs, by schedule row and offset (job_cron_offset_idx), for the jobs of a peak. The forecast's
  counts read each job's day rules and DST policy, so neither of its indexes served them alone; its
  index of interval and one-time jobs by next slot is gone (their count read every page of the
  table through it: a sequential scan reads the same pages);
- the name's ``varchar_pattern_ops`` index, which PostgreSQL's backend makes for a unique text
  column, serves ``LIKE 'prefix%'`` only: nothing asks that (the jobs list's search is a case-blind
  ``icontains``, which no B-tree serves). The unique constraint's own index stays.

The new indexes are built first, and on PostgreSQL concurrently, as 0039's were; then the old ones
are dropped."""

from importlib import import_module

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations, models

try:
    from django_migration_linter import IgnoreMigration
except ImportError:  # a dev dependency (scripts/lint_migrations.py): the service's own install has none
    IgnoreMigration = None

# 0039's operation: CREATE INDEX CONCURRENTLY on PostgreSQL outside a transaction, else a plain one.
AddIndexConcurrentlyOnPostgres = import_module("jobs.migrations.0039_partial_schedule_indexes").AddIndexConcurrentlyOnPostgres
concurrently = AddIndexConcurrentlyOnPostgres.concurrently


class AddUniqueIndexConcurrentlyOnPostgres(migrations.AddConstraint):
    """A unique constraint with a condition, which PostgreSQL keeps as a unique partial index, built
    as AddIndexConcurrentlyOnPostgres builds an index."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not concurrently(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        sql = str(self.constraint.create_sql(model, schema_editor))
        schema_editor.execute(sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX CONCURRENTLY", 1))


class DropUniqueOnPostgres(migrations.AlterField):
    """A field's ``unique`` taken off. On PostgreSQL its unique constraints are dropped as Django
    finds them (by the column, less the model's named constraints), and nothing else: Django's own
    way also drops a ``_like`` index, which a UUID never has, under the table's lock. On SQLite the
    table is made again, as Django does."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        named = {constraint.name for constraint in to_state.apps.get_model(app_label, self.model_name)._meta.constraints}
        for name in schema_editor._constraint_names(model, [model._meta.get_field(self.name).column], unique=True,
                                                    primary_key=False, exclude=named):
            schema_editor.execute(schema_editor._delete_unique_sql(model, name))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        migrations.AlterField.database_forwards(self, app_label, schema_editor, from_state, to_state)


class RemoveIndexConcurrentlyOnPostgres(RemoveIndexConcurrently):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if concurrently(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.RemoveIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if concurrently(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.RemoveIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class DropPatternIndex(migrations.operations.base.Operation):
    """The ``varchar_pattern_ops`` index of a unique text column, which Django's state does not know
    of (its PostgreSQL backend makes it itself, and drops it IF EXISTS when the column changes),
    dropped, and made again when undone, on PostgreSQL (SQLite never has one); concurrently where it
    can be."""

    reversible = True

    def __init__(self, table, column, name):
        self.table, self.column, self.name = table, column, name

    def deconstruct(self):
        return self.__class__.__name__, [self.table, self.column, self.name], {}

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            how = "CONCURRENTLY IF EXISTS" if concurrently(schema_editor) else "IF EXISTS"
            schema_editor.execute(f"DROP INDEX {how} {self.name}")

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            how = "CONCURRENTLY IF NOT EXISTS" if concurrently(schema_editor) else "IF NOT EXISTS"
            schema_editor.execute(f"CREATE INDEX {how} {self.name} ON {self.table} ({self.column} varchar_pattern_ops)")

    def describe(self):
        return f"Drop the index {self.name}"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('jobs', '0039_partial_schedule_indexes'),
    ]

    operations = [
        # The linter refuses any unique index built on a table that has rows (it could meet duplicates):
        # this one is the unique constraint's own rows less the NULLs, so it cannot. Its other checks pass.
        *([IgnoreMigration()] if IgnoreMigration else []),
        AddIndexConcurrentlyOnPostgres(
            model_name='job',
            index=models.Index(condition=models.Q(('enabled', True), ('schedule_type', 'cron')),
                               fields=['crontab', 'spread_offset_seconds'], name='job_cron_offset_idx'),
        ),
        AddUniqueIndexConcurrentlyOnPostgres(
            model_name='job',
            constraint=models.UniqueConstraint(condition=models.Q(('ping_key__isnull', False)), fields=('ping_key',),
                                               name='job_ping_key_unique'),
        ),
        DropUniqueOnPostgres(
            model_name='job',
            name='ping_key',
            field=models.UUIDField(blank=True, editable=False, null=True),
        ),
        RemoveIndexConcurrentlyOnPostgres(
            model_name='job',
            name='job_forecast_cron_idx',
        ),
        RemoveIndexConcurrentlyOnPostgres(
            model_name='job',
            name='job_forecast_timed_idx',
        ),
        DropPatternIndex('jobs_job', 'name', 'jobs_job_name_84b28495_like'),
    ]
