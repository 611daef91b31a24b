# The "paused" event (a job paused itself after failures in a row).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0006_channel_kinds_from_registry'),
    ]

    operations = [
        migrations.AlterField(
            model_name='delivery',
            name='event',
            field=models.CharField(choices=[('failed', 'Run failed (final)'), ('attempt_failed', 'Attempt failed (will retry)'), ('timed_out', 'Run timed out'), ('lost', 'Run lost (its workers kept dying)'), ('sla_overrun', 'Still running past its SLA'), ('finished_late', 'Finished after overrunning its SLA'), ('missed', 'Scheduled run missed'), ('recovered', 'Recovered after a failure'), ('succeeded', 'Run succeeded'), ('paused', 'Job paused itself after failures in a row (auto-pause)'), ('scheduler_down', 'Scheduler down (no scheduler ticks), and its recovery'), ('scheduler_recovered', 'Scheduler recovered'), ('digest', 'Digest of many notifications'), ('test', 'Test notification')], max_length=32),
        ),
    ]
