"""The on-time reports' day counts as one row a job and day (``JobDayFigures.counts``: {measure:
count}) instead of one row a job, day and measure: a run's end writes one row, not five (issue 46).

The rows kept so far are packed into the new table. The old table, ``jobs_jobdaycounts``, is left in
the database (expand, then contract): a process of the release before this one, still running during
an upgrade, reads and writes it. A later migration drops it. The ends such a process folds there are
not in the new table: ``lifecycle.recount_ends()`` counts every kept run again."""

import django.db.models.deletion
from django.db import migrations, models

OLD, NEW = "jobs_jobdaycounts", "jobs_jobdayfigures"


def pack(apps, schema_editor):
    connection = schema_editor.connection
    aggregate = "jsonb_object_agg(measure, count)" if connection.vendor == "postgresql" else \
        "json_group_object(measure, count)"
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {NEW} (job_id, day, counts) SELECT job_id, day, {aggregate} FROM {OLD} "
                       "GROUP BY job_id, day")


def unpack(apps, schema_editor):
    connection = schema_editor.connection
    each = "jsonb_each_text(f.counts)" if connection.vendor == "postgresql" else "json_each(f.counts)"
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {OLD}")
        cursor.execute(f"INSERT INTO {OLD} (job_id, day, measure, count) SELECT f.job_id, f.day, c.key, "
                       f"CAST(c.value AS bigint) FROM {NEW} AS f, {each} AS c")


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0037_ping_queue'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobDayFigures',
            fields=[
                ('pk', models.CompositePrimaryKey('job_id', 'day', blank=True, editable=False, primary_key=True, serialize=False)),
                ('day', models.DateField()),
                ('counts', models.JSONField(default=dict)),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
            ],
        ),
        migrations.RunPython(pack, unpack, elidable=False),
        # Gone from the models, kept in the database until a later release (see above), with no
        # foreign key left: a job's deletion no longer deletes its rows there, and must not fail on them.
        migrations.AlterField(
            model_name='jobdaycounts', name='job',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='+', to='jobs.job')),
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name='JobDayCounts')]),
    ]
