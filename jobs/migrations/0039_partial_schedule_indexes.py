"""A job's schedule rows and team indexed where set only (issue 46): a dispatch's update of a job's
row is not a HOT one (next_run_at is indexed), and each index the row is in took a new entry, for
two of the three schedule columns (and the team, for most jobs) an entry of a NULL.

The new indexes are built first, and on PostgreSQL concurrently: jobs are saved and dispatched while
they are. Then the old ones are dropped (a catalog change, done at once)."""

import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

NAMES = ("crontab", "interval", "clocked", "group")


class AddIndexConcurrentlyOnPostgres(AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL; a plain CREATE INDEX on another database (SQLite), or
    inside a transaction (which CONCURRENTLY cannot run in: a test migrating back and forth in its own)."""

    @staticmethod
    def concurrently(schema_editor):
        return schema_editor.connection.vendor == "postgresql" and not schema_editor.connection.in_atomic_block

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if self.concurrently(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if self.concurrently(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return migrations.AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
        ('jobs', '0038_day_figures'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        *[AddIndexConcurrentlyOnPostgres(
            model_name='job',
            index=models.Index(condition=models.Q((f'{name}__isnull', False)), fields=[name], name=f'job_{name}_idx'),
        ) for name in NAMES],
        migrations.AlterField(
            model_name='job',
            name='clocked',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.clockedschedule'),
        ),
        migrations.AlterField(
            model_name='job',
            name='crontab',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.crontabschedule'),
        ),
        migrations.AlterField(
            model_name='job',
            name='group',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='auth.group'),
        ),
        migrations.AlterField(
            model_name='job',
            name='interval',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.intervalschedule'),
        ),
    ]
