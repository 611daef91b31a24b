# A job's spread (a per-job offset of its slots, kept computed beside it for the forecast) and its cron
# expression as written when it holds H.

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0024_calendars'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='cron_text',
            field=models.CharField(blank=True, default='', editable=False, max_length=200),
        ),
        migrations.AddField(
            model_name='job',
            name='spread',
            field=models.PositiveIntegerField(default=0, help_text="Move every slot by the same offset in [0, spread) seconds, chosen from a hash of the job's name: jobs on one schedule stop starting in the same second (docs/guide/forecast.md).", validators=[django.core.validators.MaxValueValidator(86400)], verbose_name='spread (s)'),
        ),
        migrations.AddField(
            model_name='job',
            name='spread_offset_seconds',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('enabled', True)), fields=['schedule_type', 'crontab', 'spread_offset_seconds'], name='job_forecast_cron_idx'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('enabled', True), ('schedule_type__in', ['interval', 'once'])), fields=['schedule_type', 'interval', 'next_run_at'], name='job_forecast_timed_idx'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('spread__gte', 0), ('spread__lte', 86400)), name='job_spread_range'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('spread', 0), ('spread_offset_seconds', 0)), ('spread_offset_seconds__lt', models.F('spread')), _connector='OR'), name='job_spread_offset_within'),
        ),
    ]
