"""notifications.0001 to notifications.0007, of the release d8a114e, squashed (manage.py squashmigrations);
see jobs.0001_squashed_0030_bundle. The channel's unique name is added last, as notifications.0004 added
it: its constraint keeps the name it has on the databases made before."""

import django.db.models.deletion
import django.utils.timezone
import notifications.channels
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('notifications', '0001_initial'), ('notifications', '0002_lost_budget'), ('notifications', '0003_watchdog'), ('notifications', '0004_as_code'), ('notifications', '0005_encrypt_channel_secrets'), ('notifications', '0006_channel_kinds_from_registry'), ('notifications', '0007_paused_event')]

    initial = True

    dependencies = [
        ('jobs', '0001_squashed_0030_bundle'),
    ]

    operations = [
        migrations.CreateModel(
            name='Channel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200)),
                ('kind', models.CharField(choices=notifications.channels.choices, max_length=16)),
                ('config', models.JSONField(blank=True, default=dict)),
                ('enabled', models.BooleanField(default=True)),
                ('last_error', models.TextField(blank=True)),
                ('disabled_reason', models.TextField(blank=True, help_text='Set when a permanent error disabled the channel.')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Rule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('events', models.JSONField(default=list, help_text='Event names, e.g. ["failed", "timed_out"].')),
                ('scope', models.CharField(choices=[('all', 'All jobs'), ('tag', 'Jobs with a tag'), ('job', 'One job')], default='all', max_length=8)),
                ('tag', models.CharField(blank=True, max_length=100)),
                ('enabled', models.BooleanField(default=True)),
                ('channel', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rules', to='notifications.channel')),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('scope', 'all'), models.Q(('scope', 'tag'), models.Q(('tag', ''), _negated=True)), models.Q(('job__isnull', False), ('scope', 'job')), _connector='OR'), name='rule_scope_has_its_target')],
            },
        ),
        migrations.CreateModel(
            name='Delivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(choices=[('failed', 'Run failed (final)'), ('attempt_failed', 'Attempt failed (will retry)'), ('timed_out', 'Run timed out'), ('lost', 'Run lost (its workers kept dying)'), ('sla_overrun', 'Still running past its SLA'), ('finished_late', 'Finished after overrunning its SLA'), ('missed', 'Scheduled run missed'), ('recovered', 'Recovered after a failure'), ('succeeded', 'Run succeeded'), ('paused', 'Job paused itself after failures in a row (auto-pause)'), ('scheduler_down', 'Scheduler down (no scheduler ticks), and its recovery'), ('scheduler_recovered', 'Scheduler recovered'), ('digest', 'Digest of many notifications'), ('test', 'Test notification')], max_length=32)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed'), ('given_up', 'Given Up'), ('folded', 'Folded into a digest'), ('suppressed', 'Suppressed (incident already open)')], default='pending', max_length=16)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('last_error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('queued_at', models.DateTimeField(blank=True, null=True)),
                ('dedup_key', models.CharField(max_length=200, unique=True)),
                ('payload', models.JSONField(default=dict)),
                ('channel', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='notifications.channel')),
                ('digest', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='folded', to='notifications.delivery')),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.jobrun')),
            ],
            options={
                'verbose_name_plural': 'deliveries',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(condition=models.Q(('status__in', ['pending', 'sending'])), fields=['next_attempt_at'], name='delivery_due_idx'), models.Index(fields=['channel', 'created_at'], name='delivery_channel_recent_idx'), models.Index(fields=['run', 'event'], name='delivery_run_event_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'sending', 'sent', 'failed', 'given_up', 'folded', 'suppressed'])), name='delivery_status_valid')],
            },
        ),
        migrations.AlterField(
            model_name='channel',
            name='name',
            field=models.CharField(max_length=200, unique=True),
        ),
    ]
