# Maintenance windows (jobs.models.Window): a new table only.

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('jobs', '0034_operate'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Window',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('shared', models.BooleanField(db_default=False, default=False, help_text='Seen and used by everyone (only staff set it); changed by staff only.')),
                ('name', models.CharField(help_text="Letters, digits, '.', '_' and '-', starting with a letter or a digit, not only digits, at most 100 characters.", max_length=100, unique=True, validators=[django.core.validators.RegexValidator('^(?![0-9]+\\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,99}\\Z', "Letters, digits, '.', '_' and '-', starting with a letter or a digit, not only digits, at most 100 characters.")])),
                ('description', models.TextField(blank=True)),
                ('mode', models.CharField(choices=[('hold', 'hold (skip the slots inside)'), ('mute', 'mute (run them, notify nothing)')], default='hold', max_length=8)),
                ('starts_at', models.DateTimeField(blank=True, help_text="A one-off window's start.", null=True)),
                ('ends_at', models.DateTimeField(blank=True, help_text="A one-off window's end (after its start).", null=True)),
                ('cron', models.CharField(blank=True, help_text="A recurring window's starts, a cron expression (such as 0 2 * * 0).", max_length=200)),
                ('duration_seconds', models.PositiveIntegerField(blank=True, help_text='How long a recurring window lasts from each start.', null=True)),
                ('timezone', models.CharField(blank=True, help_text='The zone of the cron expression (default UTC).', max_length=64)),
                ('jobs', models.JSONField(blank=True, default=list, help_text='Ids of the jobs it applies to.')),
                ('tags', models.JSONField(blank=True, default=list, help_text='It applies to the jobs with any of these tags too.')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated')),
                ('group', models.ForeignKey(blank=True, help_text="The team it belongs to as well (one of its owner's groups).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='auth.group')),
                ('owner', models.ForeignKey(blank=True, help_text="Who made it (empty: staff's).", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('cron', ''), ('duration_seconds__isnull', True), ('ends_at__isnull', False), ('starts_at__isnull', False)), models.Q(('duration_seconds__isnull', False), ('ends_at__isnull', True), ('starts_at__isnull', True), models.Q(('cron', ''), _negated=True)), _connector='OR'), name='window_one_off_or_recurring')],
            },
        ),
    ]
