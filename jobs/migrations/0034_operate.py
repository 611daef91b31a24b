"""Day-two operations: a job's versions (``JobVersion``, the job's current number, the number each
run was made from) and reruns of finished runs (``RunRerun``). Safe on a running service: two new
tables, a nullable column on the runs and a column with a database default on the jobs (neither
rewrites its table nor scans it)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0033_checkins'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='version',
            field=models.IntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.AddField(
            model_name='jobrun',
            name='job_version',
            field=models.IntegerField(blank=True, editable=False, null=True),
        ),
        migrations.CreateModel(
            name='JobVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('author_name', models.CharField(blank=True, help_text='Who saved it, as the audit trail names them.', max_length=255)),
                ('values', models.JSONField(default=dict)),
                ('changes', models.JSONField(default=dict)),
                ('detail', models.CharField(blank=True, max_length=255)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='jobs.job')),
            ],
            options={
                'ordering': ['job', '-number'],
                'constraints': [models.UniqueConstraint(fields=('job', 'number'), name='job_version_one_per_number')],
            },
        ),
        migrations.CreateModel(
            name='RunRerun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('attempt', models.PositiveIntegerField(help_text="The rerun's first attempt.")),
                ('previous_status', models.CharField(choices=[('pending', 'Pending'), ('queued', 'Queued'), ('running', 'Running'), ('retrying', 'Retrying'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('timed_out', 'Timed Out'), ('lost', 'Lost'), ('skipped', 'Skipped'), ('cancelled', 'Cancelled')], max_length=16)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reruns', to='jobs.jobrun')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('by__isnull', False)), fields=['by', '-created_at'], name='rerun_by_recent_idx')],
            },
        ),
    ]
