"""Teams: limits and calendars get an owner, a team and ``shared`` (the ones made before stay shared),
teams get quotas, and the words of the ``bundle`` choices say a new job is bundled (no table change)."""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def shared_as_before(apps, schema_editor):
    """Limits and calendars made before teams were everyone's to name: they stay shared."""
    for name in ("Limit", "Calendar"):
        apps.get_model("jobs", name).objects.update(shared=True)


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('jobs', '0001_squashed_0030_bundle'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='calendar',
            name='group',
            field=models.ForeignKey(blank=True, help_text="The team it belongs to as well (one of its owner's groups).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='auth.group'),
        ),
        migrations.AddField(
            model_name='calendar',
            name='owner',
            field=models.ForeignKey(blank=True, help_text="Who made it (empty: staff's).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='calendar',
            name='shared',
            field=models.BooleanField(db_default=False, default=False, help_text='Seen and used by everyone (only staff set it); changed by staff only.'),
        ),
        migrations.AddField(
            model_name='limit',
            name='group',
            field=models.ForeignKey(blank=True, help_text="The team it belongs to as well (one of its owner's groups).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='auth.group'),
        ),
        migrations.AddField(
            model_name='limit',
            name='owner',
            field=models.ForeignKey(blank=True, help_text="Who made it (empty: staff's).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='limit',
            name='shared',
            field=models.BooleanField(db_default=False, default=False, help_text='Seen and used by everyone (only staff set it); changed by staff only.'),
        ),
        migrations.CreateModel(
            name='TeamQuota',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('max_jobs', models.PositiveIntegerField(blank=True, help_text="At most this many jobs of the team (its group's), together; empty: no team bound.", null=True, validators=[django.core.validators.MaxValueValidator(1000000000)])),
                ('max_workflows', models.PositiveIntegerField(blank=True, help_text='At most this many workflows of the team, together; empty: no team bound.', null=True, validators=[django.core.validators.MaxValueValidator(1000000000)])),
                ('max_runs_per_hour', models.PositiveIntegerField(blank=True, help_text="At most this many runs of the team's jobs started by its members (run now, backfill, workflow runs) in any hour; empty: no team bound.", null=True, validators=[django.core.validators.MaxValueValidator(1000000000)])),
                ('max_runs_in_flight', models.PositiveIntegerField(blank=True, help_text="At most this many runs of the team's jobs not yet ended; empty: no team bound.", null=True, validators=[django.core.validators.MaxValueValidator(1000000000)])),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated')),
            ],
            options={
                'verbose_name': 'team quota',
                'ordering': ['group__name'],
            },
        ),
        migrations.RemoveIndex(
            model_name='jobrun',
            name='run_triggered_by_idx',
        ),
        migrations.AddIndex(
            model_name='jobrun',
            index=models.Index(condition=models.Q(('triggered_by__isnull', False)), fields=['triggered_by', '-created_at'], name='run_triggered_by_recent_idx'),
        ),
        migrations.AddField(
            model_name='teamquota',
            name='group',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='quota', to='auth.group', verbose_name='team'),
        ),
        migrations.AlterField(
            model_name='job',
            name='bundle',
            field=models.CharField(choices=[('auto', 'Unless its recent runs are long (a new job is bundled)'), ('short', 'The same as auto (a new job is bundled)'), ('never', 'Never: each run its own message')], db_default='auto', default='auto', help_text="When many runs are due together, short ones share a message (a bundle): auto (or short) unless the job's recent runs are long (JOBS_BUNDLE_SHORT_SECONDS), a new job included; never to keep each run its own message.", max_length=8),
        ),
        migrations.RunPython(shared_as_before, migrations.RunPython.noop),
    ]
