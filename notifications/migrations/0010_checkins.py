"""The too_fast and too_often events (a choice, no table change)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0009_paging'),
    ]

    operations = [
        migrations.AlterField(
            model_name='delivery',
            name='event',
            field=models.CharField(choices=[('failed', 'Run failed (final)'), ('attempt_failed', 'Attempt failed (will retry)'), ('timed_out', 'Run timed out'), ('lost', 'Run lost (its workers kept dying)'), ('sla_overrun', 'Still running past its SLA'), ('finished_late', 'Finished after overrunning its SLA'), ('missed', 'Scheduled run missed (a check-in: no ping within the grace time)'), ('too_fast', "Run succeeded sooner than the job's shortest run (min_duration_seconds)"), ('too_often', 'Check-in pinged more often than its schedule'), ('recovered', 'Recovered after a failure'), ('succeeded', 'Run succeeded'), ('paused', 'Job paused itself after failures in a row (auto-pause)'), ('acknowledged', 'Incident acknowledged by a person'), ('scheduler_down', 'Scheduler down (no scheduler ticks), and its recovery'), ('scheduler_recovered', 'Scheduler recovered'), ('digest', 'Digest of many notifications'), ('test', 'Test notification')], max_length=32),
        ),
    ]
