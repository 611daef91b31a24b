"""A workflow's versions (``WorkflowVersion``, the workflow's current number, the number each
workflow run ran), as jobs.0034_operate made a job's. Safe on a running service: a new table, a
nullable column on the workflow runs and a column with a database default on the workflows
(neither rewrites its table nor scans it)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0001_squashed_0002_step_params'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='workflow',
            name='version',
            field=models.IntegerField(db_default=0, default=0, editable=False),
        ),
        migrations.AddField(
            model_name='workflowrun',
            name='workflow_version',
            field=models.IntegerField(blank=True, editable=False, null=True),
        ),
        migrations.CreateModel(
            name='WorkflowVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('author_name', models.CharField(blank=True, help_text='Who saved it, as the audit trail names them.', max_length=255)),
                ('values', models.JSONField(default=dict)),
                ('changes', models.JSONField(default=dict)),
                ('detail', models.CharField(blank=True, max_length=255)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('workflow', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='workflows.workflow')),
            ],
            options={
                'ordering': ['workflow', '-number'],
                'constraints': [models.UniqueConstraint(fields=('workflow', 'number'), name='workflow_version_one_per_number')],
            },
        ),
    ]
