"""Check-in jobs (jobs.kinds.checkin): their ping key, grace and how far their slots were looked at; the shortest
run of any job; runs made by a ping (a new trigger, no table change). Nullable columns only."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0032_paging'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='ping_check_from',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='grace_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='Check-in jobs: a slot with no ping within this many seconds ends failed and sends missed; empty means an hour.', null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(2592000)], verbose_name='grace (s)'),
        ),
        migrations.AddField(
            model_name='job',
            name='min_duration_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='A run that succeeds sooner than this many seconds sends the too_fast event.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='shortest run (s)'),
        ),
        migrations.AddField(
            model_name='job',
            name='ping_key',
            field=models.UUIDField(blank=True, editable=False, null=True, unique=True),
        ),
        migrations.AlterField(
            model_name='jobrun',
            name='trigger',
            field=models.CharField(choices=[('schedule', 'Schedule'), ('manual', 'Manual'), ('backfill', 'Backfill'), ('workflow', 'Workflow'), ('ping', 'Ping')], default='schedule', max_length=16),
        ),
    ]
