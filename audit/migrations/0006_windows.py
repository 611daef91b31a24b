# A maintenance window's subject in the audit trail (jobs.models.Window).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0005_paging'),
        ('jobs', '0031_team_ownership'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='auditentry',
            name='audit_subject_valid',
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='subject',
            field=models.CharField(choices=[('job', 'job'), ('workflow', 'workflow'), ('channel', 'channel'), ('rule', 'rule'), ('secrets', 'secrets'), ('limit', 'limit'), ('calendar', 'calendar'), ('quota', 'team quota'), ('window', 'maintenance window'), ('user', 'user'), ('group', 'group'), ('token', 'API token'), ('trail', 'the audit trail')], default='job', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='auditentry',
            constraint=models.CheckConstraint(condition=models.Q(('subject__in', ['job', 'workflow', 'channel', 'rule', 'secrets', 'limit', 'calendar', 'quota', 'window', 'user', 'group', 'token', 'trail'])), name='audit_subject_valid'),
        ),
    ]
