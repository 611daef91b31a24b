"""A new job is bundled by default (jobs.lifecycle.bundling): the words of the ``bundle`` choices say so.
No change to the table."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0032_team_quotas'),
    ]

    operations = [
        migrations.AlterField(
            model_name='job',
            name='bundle',
            field=models.CharField(choices=[('auto', 'Unless its recent runs are long (a new job is bundled)'), ('short', 'The same as auto (a new job is bundled)'), ('never', 'Never: each run its own message')], db_default='auto', default='auto', help_text="When many runs are due together, short ones share a message (a bundle): auto (or short) unless the job's recent runs are long (JOBS_BUNDLE_SHORT_SECONDS), a new job included; never to keep each run its own message.", max_length=8),
        ),
    ]
