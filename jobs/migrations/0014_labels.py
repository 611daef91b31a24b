# Labels a person reads (verbose names): "CPU time limit (s)", not "Cpu limit seconds". No column changes.

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0013_priority'),
    ]

    operations = [
        migrations.AlterField(
            model_name='job',
            name='args',
            field=models.JSONField(blank=True, default=list, verbose_name='arguments'),
        ),
        migrations.AlterField(
            model_name='job',
            name='catchup_max',
            field=models.PositiveIntegerField(default=10, help_text="With the 'all' policy, the most missed slots run after downtime.", verbose_name='catch-up at most (slots)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='catchup_policy',
            field=models.CharField(choices=[('none', 'Skip missed slots'), ('latest', 'Run the most recent missed slot'), ('all', 'Run every missed slot (bounded)')], default='latest', max_length=8, verbose_name='catch-up policy'),
        ),
        migrations.AlterField(
            model_name='job',
            name='cpu_limit_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='Command jobs: the most CPU time each process may use, in seconds.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='CPU time limit (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='created_at',
            field=models.DateTimeField(auto_now_add=True, verbose_name='created'),
        ),
        migrations.AlterField(
            model_name='job',
            name='http_body',
            field=models.TextField(blank=True, verbose_name='HTTP body'),
        ),
        migrations.AlterField(
            model_name='job',
            name='http_headers',
            field=models.JSONField(blank=True, default=dict, verbose_name='HTTP headers'),
        ),
        migrations.AlterField(
            model_name='job',
            name='http_method',
            field=models.CharField(blank=True, default='GET', max_length=8, verbose_name='HTTP method'),
        ),
        migrations.AlterField(
            model_name='job',
            name='http_ok_statuses',
            field=models.JSONField(blank=True, default=list, help_text='Accepted status codes; empty means any 2xx.', verbose_name='accepted HTTP statuses'),
        ),
        migrations.AlterField(
            model_name='job',
            name='jitter_seconds',
            field=models.PositiveIntegerField(default=0, help_text='Start each scheduled run up to this many seconds after its slot, at random.', verbose_name='jitter (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='kwargs',
            field=models.JSONField(blank=True, default=dict, verbose_name='keyword arguments'),
        ),
        migrations.AlterField(
            model_name='job',
            name='max_lost_attempts',
            field=models.PositiveIntegerField(blank=True, help_text='Attempts lost to the infrastructure (a worker died or was cut off) that are run again at once, apart from max_retries; empty means JOBS_MAX_LOST_ATTEMPTS.', null=True, validators=[django.core.validators.MaxValueValidator(100)], verbose_name='lost attempts run again'),
        ),
        migrations.AlterField(
            model_name='job',
            name='memory_limit_mb',
            field=models.PositiveIntegerField(blank=True, help_text='Command jobs: the most address space (virtual memory) each process may use, in MB.', null=True, validators=[django.core.validators.MinValueValidator(8)], verbose_name='memory limit (MB)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='next_run_at',
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name='next run'),
        ),
        migrations.AlterField(
            model_name='job',
            name='retention_days',
            field=models.PositiveIntegerField(blank=True, help_text='Delete finished runs older than this many days; empty means JOBS_RETENTION_DAYS.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='keep runs for (days)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='retention_min_runs',
            field=models.PositiveIntegerField(blank=True, help_text='Always keep at least this many of the newest runs; empty means JOBS_RETENTION_MIN_RUNS.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='keep at least (runs)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='retry_backoff_max_seconds',
            field=models.FloatField(default=600, validators=[django.core.validators.MinValueValidator(0)], verbose_name='longest retry backoff (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='retry_backoff_seconds',
            field=models.FloatField(default=10, validators=[django.core.validators.MinValueValidator(0)], verbose_name='retry backoff (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='retry_jitter',
            field=models.BooleanField(default=True, verbose_name='jitter on retries'),
        ),
        migrations.AlterField(
            model_name='job',
            name='secret_http_headers',
            field=models.JSONField(blank=True, default=dict, help_text='HTTP headers whose values are secret (tokens).', verbose_name='secret HTTP headers'),
        ),
        migrations.AlterField(
            model_name='job',
            name='sla_seconds',
            field=models.PositiveIntegerField(blank=True, null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='SLA (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='start_deadline_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='A scheduled run that cannot start within this many seconds of its slot is skipped as missed.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='start deadline (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='timeout_seconds',
            field=models.PositiveIntegerField(default=3600, validators=[django.core.validators.MinValueValidator(1)], verbose_name='timeout (s)'),
        ),
        migrations.AlterField(
            model_name='job',
            name='updated_at',
            field=models.DateTimeField(auto_now=True, verbose_name='updated'),
        ),
        migrations.AlterField(
            model_name='jobrun',
            name='next_attempt_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='next attempt'),
        ),
        migrations.AlterField(
            model_name='jobrun',
            name='output_bytes',
            field=models.BigIntegerField(default=0, help_text='Bytes the job wrote, kept or not.', verbose_name='output size (bytes)'),
        ),
    ]
