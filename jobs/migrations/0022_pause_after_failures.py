# Auto-pause: a job may pause itself after failures in a row (jobs.lifecycle.streaks).

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0021_limits'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='consecutive_failures',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name='job',
            name='pause_after_failures',
            field=models.PositiveIntegerField(blank=True, help_text='Pause the job itself after this many runs in a row end failed, timed out or lost; empty or 0: never.', null=True, validators=[django.core.validators.MaxValueValidator(1000)], verbose_name='pause after failures'),
        ),
        migrations.AddField(
            model_name='job',
            name='paused_reason',
            field=models.TextField(blank=True, editable=False, help_text='Why the service paused the job itself (auto-pause); cleared on resume.'),
        ),
    ]
