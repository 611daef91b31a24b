"""Fewer writes per run: no index of runs names the status (they read ``phase``, which a claim
leaves as it is), the attempts' heartbeat is no longer indexed, and runs leave room on their pages,
so a claim and a heartbeat are HOT updates (models.run, models.attempt say why each index is there).

Adding the stored ``phase`` rewrites the runs table under an exclusive lock: minutes at 10,000,000 runs."""

import django.db.models.lookups
from django.db import migrations, models

# A run's row gets new versions as it is claimed and beats; one in the same page as the old is a HOT
# update (no index written), which needs room there: 20 % of each page is left free on insert.
RUNS_FILLFACTOR = 80


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE jobs_jobrun SET (fillfactor = {RUNS_FILLFACTOR})")


def fill_pages(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE jobs_jobrun RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0028_run_traceparent'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='jobattempt',
            name='attempt_heartbeat_idx',
        ),
        migrations.RemoveIndex(
            model_name='jobrun',
            name='run_active_idx',
        ),
        migrations.RemoveIndex(
            model_name='jobrun',
            name='run_unsuccessful_idx',
        ),
        migrations.RemoveIndex(
            model_name='jobrun',
            name='run_job_unsuccessful_idx',
        ),
        migrations.AddField(
            model_name='jobrun',
            name='phase',
            field=models.GeneratedField(db_persist=True, expression=models.Case(models.When(django.db.models.lookups.In(models.F('status'), ['queued', 'running']), then=models.Value('live')), models.When(django.db.models.lookups.Exact(models.F('status'), 'succeeded'), then=models.Value(None)), default=models.F('status'), output_field=models.CharField(max_length=16, null=True)), output_field=models.CharField(max_length=16, null=True)),
        ),
        migrations.AddIndex(
            model_name='jobrun',
            index=models.Index(condition=models.Q(('phase__in', ['failed', 'timed_out', 'lost', 'skipped', 'cancelled'])), fields=['phase', '-created_at'], name='run_unsuccessful_idx'),
        ),
        migrations.AddIndex(
            model_name='jobrun',
            index=models.Index(condition=models.Q(('phase__in', ['failed', 'timed_out', 'lost', 'skipped', 'cancelled'])), fields=['job', 'phase', '-created_at', '-id'], name='run_job_unsuccessful_idx'),
        ),
        migrations.AddIndex(
            model_name='jobrun',
            index=models.Index(condition=models.Q(('phase__in', ('pending', 'live', 'retrying'))), fields=['phase', 'next_attempt_at'], name='run_active_idx'),
        ),
        migrations.RunPython(leave_room, fill_pages),
    ]
