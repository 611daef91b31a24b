"""workflows.0001 to workflows.0002, of the release d8a114e, squashed (manage.py squashmigrations); see
jobs.0001_squashed_0030_bundle."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('workflows', '0001_initial'), ('workflows', '0002_step_params')]

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
        ('jobs', '0001_squashed_0030_bundle'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Workflow',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200, unique=True)),
                ('description', models.TextField(blank=True)),
                ('on_upstream_failure', models.CharField(choices=[('skip', 'Skip the downstream job'), ('run', 'Run the downstream job anyway')], default='skip', help_text='What a failed upstream means for a downstream job, unless its edge says otherwise.', max_length=8)),
                ('schedule_type', models.CharField(choices=[('cron', 'Cron'), ('interval', 'Fixed interval'), ('once', 'Once'), ('manual', 'Manual only')], default='manual', max_length=16)),
                ('enabled', models.BooleanField(default=True)),
                ('next_run_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('clocked', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='django_celery_beat.clockedschedule')),
                ('crontab', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='django_celery_beat.crontabschedule')),
                ('group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='workflows', to='auth.group')),
                ('interval', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='django_celery_beat.intervalschedule')),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='workflows', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
                'indexes': [models.Index(condition=models.Q(('enabled', True), ('next_run_at__isnull', False)), fields=['next_run_at'], name='workflow_due_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('clocked__isnull', True), ('crontab__isnull', False), ('interval__isnull', True), ('schedule_type', 'cron')), models.Q(('clocked__isnull', True), ('crontab__isnull', True), ('interval__isnull', False), ('schedule_type', 'interval')), models.Q(('clocked__isnull', False), ('crontab__isnull', True), ('interval__isnull', True), ('schedule_type', 'once')), models.Q(('clocked__isnull', True), ('crontab__isnull', True), ('interval__isnull', True), ('schedule_type', 'manual')), _connector='OR'), name='workflow_exactly_one_schedule'), models.CheckConstraint(condition=models.Q(('on_upstream_failure__in', ['skip', 'run'])), name='workflow_failure_policy_valid')],
            },
        ),
        migrations.CreateModel(
            name='WorkflowNode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='workflow_nodes', to='jobs.job')),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='workflows.workflow')),
                ('params', models.JSONField(blank=True, default=dict)),
            ],
            options={
                'ordering': ['workflow', 'id'],
                'constraints': [models.UniqueConstraint(fields=('workflow', 'job'), name='workflow_node_one_per_job')],
            },
        ),
        migrations.CreateModel(
            name='WorkflowRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='running', max_length=16)),
                ('trigger', models.CharField(choices=[('schedule', 'Schedule'), ('manual', 'Manual'), ('rerun', 'Rerun')], max_length=16)),
                ('scheduled_for', models.DateTimeField()),
                ('cancel_requested', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('reason', models.CharField(blank=True, max_length=255)),
                ('rerun_of', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rerun', to='workflows.workflowrun')),
                ('triggered_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='workflows.workflow')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['workflow', '-created_at'], name='workflow_run_recent_idx')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('trigger', 'schedule')), fields=('workflow', 'scheduled_for'), name='workflow_run_one_per_slot'), models.CheckConstraint(condition=models.Q(('status__in', ['running', 'succeeded', 'failed', 'cancelled'])), name='workflow_run_status_valid')],
            },
        ),
        migrations.CreateModel(
            name='WorkflowEdge',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('on_failure', models.CharField(blank=True, choices=[('skip', 'Skip the downstream job'), ('run', 'Run the downstream job anyway')], default='', help_text="Overrides the workflow's policy for this edge; blank: the workflow's.", max_length=8)),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='edges', to='workflows.workflow')),
                ('downstream', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='upstream_edges', to='workflows.workflownode')),
                ('upstream', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='downstream_edges', to='workflows.workflownode')),
            ],
            options={
                'ordering': ['workflow', 'id'],
                'constraints': [models.UniqueConstraint(fields=('upstream', 'downstream'), name='workflow_edge_once'), models.CheckConstraint(condition=models.Q(('upstream', models.F('downstream')), _negated=True), name='workflow_edge_not_self'), models.CheckConstraint(condition=models.Q(('on_failure__in', ['', 'skip', 'run'])), name='workflow_edge_policy_valid')],
            },
        ),
        migrations.CreateModel(
            name='WorkflowStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('waiting', 'Waiting'), ('active', 'Active'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('skipped', 'Skipped'), ('cancelled', 'Cancelled')], default='waiting', max_length=16)),
                ('kept', models.BooleanField(default=False, help_text='Carried over, succeeded, from the run this one re-runs.')),
                ('reason', models.CharField(blank=True, max_length=255)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='workflows.workflownode')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.RESTRICT, related_name='workflow_steps', to='jobs.jobrun')),
                ('workflow_run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='workflows.workflowrun')),
            ],
            options={
                'ordering': ['workflow_run', 'id'],
                'indexes': [models.Index(condition=models.Q(('status', 'active')), fields=['run'], name='workflow_step_active_run_idx')],
                'constraints': [models.UniqueConstraint(fields=('workflow_run', 'node'), name='workflow_step_one_per_node'), models.CheckConstraint(condition=models.Q(('status__in', ['waiting', 'active', 'succeeded', 'failed', 'skipped', 'cancelled'])), name='workflow_step_status_valid'), models.CheckConstraint(condition=models.Q(('status', 'waiting'), ('status', 'skipped'), ('status', 'cancelled'), ('run__isnull', False), _connector='OR'), name='workflow_step_started_has_run')],
            },
        ),
    ]
