# Team ping keys (jobs.models.TeamPingKey), for the slug ping URLs /ping/<key>/<job name>: a new table only.

import django.db.models.deletion
import jobs.models.quota
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('jobs', '0035_windows'),
    ]

    operations = [
        migrations.CreateModel(
            name='TeamPingKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(default=jobs.models.quota.new_ping_key, editable=False, max_length=64, unique=True)),
                ('made_at', models.DateTimeField(auto_now=True, verbose_name='made')),
                ('group', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='ping_key', to='auth.group', verbose_name='team')),
            ],
            options={
                'verbose_name': 'team ping key',
            },
        ),
    ]
