"""audit.0001 to audit.0003, of the release d8a114e, squashed (manage.py squashmigrations); see
jobs.0001_squashed_0030_bundle."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('audit', '0001_initial'), ('audit', '0002_subjects'), ('audit', '0003_system_source_limit_and_calendar_subjects')]

    initial = True

    dependencies = [
        ('jobs', '0001_squashed_0030_bundle'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('job_name', models.CharField(help_text='The name of what the entry is about (see subject).', max_length=200)),
                ('action', models.CharField(choices=[('create', 'create'), ('change', 'change'), ('pause', 'pause'), ('resume', 'resume'), ('delete', 'delete'), ('run_now', 'run now'), ('cancel', 'cancel a run'), ('backfill', 'backfill'), ('rerun', 'rerun'), ('rotate', 'rotate secrets')], max_length=16)),
                ('actor_name', models.CharField(help_text="The user's name, or the OS user on the command line.", max_length=255)),
                ('source', models.CharField(choices=[('admin', 'admin'), ('page', 'pages'), ('api', 'API'), ('cli', 'command line'), ('system', 'the service')], max_length=8)),
                ('remote_addr', models.CharField(blank=True, help_text="The client's address, or the host on the command line.", max_length=255)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('changes', models.JSONField(blank=True, default=dict, help_text='{field: [old, new]}')),
                ('detail', models.CharField(blank=True, max_length=255)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit', to='jobs.job')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.jobrun')),
                ('subject', models.CharField(choices=[('job', 'job'), ('workflow', 'workflow'), ('channel', 'channel'), ('rule', 'rule'), ('secrets', 'secrets'), ('limit', 'limit'), ('calendar', 'calendar')], default='job', max_length=16)),
            ],
            options={
                'verbose_name_plural': 'audit entries',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['job', '-created_at'], name='audit_job_recent_idx'), models.Index(fields=['created_at'], name='audit_created_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(('action__in', ['create', 'change', 'pause', 'resume', 'delete', 'run_now', 'cancel', 'backfill', 'rerun', 'rotate'])), name='audit_action_valid'), models.CheckConstraint(condition=models.Q(('source__in', ['admin', 'page', 'api', 'cli', 'system'])), name='audit_source_valid'), models.CheckConstraint(condition=models.Q(('subject__in', ['job', 'workflow', 'channel', 'rule', 'secrets', 'limit', 'calendar'])), name='audit_subject_valid')],
            },
        ),
    ]
