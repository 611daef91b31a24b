# The service itself (auto-pause) as the source of an audit entry.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0002_subjects'),
        ('jobs', '0019_job_kinds_from_registry'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='auditentry',
            name='audit_source_valid',
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='source',
            field=models.CharField(choices=[('admin', 'admin'), ('page', 'pages'), ('api', 'API'), ('cli', 'command line'), ('system', 'the service')], max_length=8),
        ),
        migrations.AddConstraint(
            model_name='auditentry',
            constraint=models.CheckConstraint(condition=models.Q(('source__in', ['admin', 'page', 'api', 'cli', 'system'])), name='audit_source_valid'),
        ),
    ]
