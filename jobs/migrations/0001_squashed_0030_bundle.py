"""jobs.0001 to jobs.0030, the migrations of the release d8a114e, squashed (manage.py squashmigrations,
its operations folded further and checked by hand). A database that has every one of them applied takes
this one as applied; the files it replaces are gone, so a database part of the way through them upgrades
with d8a114e first (docs/operations/deployment.md, Upgrading). Their data migrations are left out: they
rewrote rows that a new database has none of."""

import django.core.validators
import django.db.models.deletion
import django.db.models.lookups
import django.utils.timezone
import jobs.kinds
from django.conf import settings
from django.db import migrations, models


# PostgreSQL's storage choices, made last: runs and attempts leave room on their pages so that a claim,
# a heartbeat and an outcome are HOT updates (jobs/models/run.py), and a run's end is one heap tuple
# with no index to write (RunEnd, jobs/models/counts.py). SQLite has neither.
POSTGRESQL_STORAGE = [
    ("ALTER TABLE jobs_jobattempt SET (fillfactor = 70)", "ALTER TABLE jobs_jobattempt RESET (fillfactor)"),
    ("ALTER TABLE jobs_jobrun SET (fillfactor = 80)", "ALTER TABLE jobs_jobrun RESET (fillfactor)"),
    ("ALTER TABLE jobs_runend DROP CONSTRAINT jobs_runend_pkey", "ALTER TABLE jobs_runend ADD PRIMARY KEY (run_id)"),
]


def storage_for_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for forwards, _ in POSTGRESQL_STORAGE:
            schema_editor.execute(forwards)


def default_storage(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for _, backwards in reversed(POSTGRESQL_STORAGE):
            schema_editor.execute(backwards)


class Migration(migrations.Migration):

    replaces = [('jobs', '0001_initial'), ('jobs', '0002_run_policies'), ('jobs', '0003_page_indexes'), ('jobs', '0004_deadline_index'), ('jobs', '0005_operator_tools'), ('jobs', '0006_workflows'), ('jobs', '0007_retention'), ('jobs', '0008_lean_indexes'), ('jobs', '0009_lost_budget'), ('jobs', '0010_secrets_permissions'), ('jobs', '0011_run_rollup'), ('jobs', '0012_leader_lease'), ('jobs', '0013_priority'), ('jobs', '0014_labels'), ('jobs', '0015_job_unsuccessful_order'), ('jobs', '0016_slot_check_from'), ('jobs', '0017_run_key_slot'), ('jobs', '0018_api_tokens_hashed'), ('jobs', '0019_job_kinds_from_registry'), ('jobs', '0020_parameters'), ('jobs', '0021_limits'), ('jobs', '0022_pause_after_failures'), ('jobs', '0023_dst_policy'), ('jobs', '0024_calendars'), ('jobs', '0025_spread'), ('jobs', '0026_reports'), ('jobs', '0027_calendar_name_rule'), ('jobs', '0028_run_traceparent'), ('jobs', '0029_run_phase'), ('jobs', '0030_bundle')]

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='DeliveryCounter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('value', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='Job',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200, unique=True)),
                ('description', models.TextField(blank=True)),
                ('tags', models.JSONField(blank=True, default=list)),
                ('kind', models.CharField(choices=jobs.kinds.choices, max_length=16)),
                ('target', models.TextField(help_text="The registered function's name, the shell command, or the URL.")),
                ('args', models.JSONField(blank=True, default=list, verbose_name='arguments')),
                ('kwargs', models.JSONField(blank=True, default=dict, verbose_name='keyword arguments')),
                ('environment', models.JSONField(blank=True, default=dict, help_text='Environment variables for a command job.')),
                ('http_method', models.CharField(blank=True, default='GET', max_length=8, verbose_name='HTTP method')),
                ('http_headers', models.JSONField(blank=True, default=dict, verbose_name='HTTP headers')),
                ('http_body', models.TextField(blank=True, verbose_name='HTTP body')),
                ('http_ok_statuses', models.JSONField(blank=True, default=list, help_text='Accepted status codes; empty means any 2xx.', verbose_name='accepted HTTP statuses')),
                ('schedule_type', models.CharField(choices=[('cron', 'Cron'), ('interval', 'Fixed interval'), ('once', 'Once'), ('manual', 'Manual only')], default='manual', max_length=16)),
                ('catchup_policy', models.CharField(choices=[('none', 'Skip missed slots'), ('latest', 'Run the most recent missed slot'), ('all', 'Run every missed slot (bounded)')], default='latest', max_length=8, verbose_name='catch-up policy')),
                ('catchup_max', models.PositiveIntegerField(default=10, help_text="With the 'all' policy, the most missed slots run after downtime.", verbose_name='catch-up at most (slots)')),
                ('enabled', models.BooleanField(default=True)),
                ('queue', models.CharField(blank=True, default='', max_length=100)),
                ('max_retries', models.PositiveIntegerField(default=0, help_text='More attempts after the first when the job itself fails or times out.', validators=[django.core.validators.MaxValueValidator(100)])),
                ('retry_backoff_seconds', models.FloatField(default=10, validators=[django.core.validators.MinValueValidator(0)], verbose_name='retry backoff (s)')),
                ('retry_backoff_max_seconds', models.FloatField(default=600, validators=[django.core.validators.MinValueValidator(0)], verbose_name='longest retry backoff (s)')),
                ('retry_jitter', models.BooleanField(default=True, verbose_name='jitter on retries')),
                ('timeout_seconds', models.PositiveIntegerField(default=3600, validators=[django.core.validators.MinValueValidator(1)], verbose_name='timeout (s)')),
                ('sla_seconds', models.PositiveIntegerField(blank=True, null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='SLA (s)')),
                ('next_run_at', models.DateTimeField(blank=True, editable=False, null=True, verbose_name='next run')),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated')),
                ('clocked', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.clockedschedule')),
                ('crontab', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.crontabschedule')),
                ('group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='auth.group')),
                ('interval', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='django_celery_beat.intervalschedule')),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
                'indexes': [models.Index(condition=models.Q(('enabled', True), ('next_run_at__isnull', False)), fields=['next_run_at'], name='job_due_idx'), models.Index(condition=models.Q(('enabled', True), ('schedule_type__in', ['interval', 'once'])), fields=['schedule_type', 'interval', 'next_run_at'], name='job_forecast_timed_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('clocked__isnull', True), ('crontab__isnull', False), ('interval__isnull', True), ('schedule_type', 'cron')), models.Q(('clocked__isnull', True), ('crontab__isnull', True), ('interval__isnull', False), ('schedule_type', 'interval')), models.Q(('clocked__isnull', False), ('crontab__isnull', True), ('interval__isnull', True), ('schedule_type', 'once')), models.Q(('clocked__isnull', True), ('crontab__isnull', True), ('interval__isnull', True), ('schedule_type', 'manual')), _connector='OR'), name='job_exactly_one_schedule'), models.CheckConstraint(condition=models.Q(('timeout_seconds__gt', 0)), name='job_timeout_positive'), models.CheckConstraint(condition=models.Q(('sla_seconds__isnull', True), ('sla_seconds__gt', 0), _connector='OR'), name='job_sla_positive'), models.CheckConstraint(condition=models.Q(('retry_backoff_seconds__gte', 0), ('retry_backoff_max_seconds__gte', 0)), name='job_backoff_not_negative')],
                'permissions': [('run_command_jobs', 'Can create, change, run and cancel command jobs')],
            },
        ),
        migrations.CreateModel(
            name='JobRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('queued', 'Queued'), ('running', 'Running'), ('retrying', 'Retrying'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('timed_out', 'Timed Out'), ('lost', 'Lost'), ('skipped', 'Skipped'), ('cancelled', 'Cancelled')], default='pending', max_length=16)),
                ('trigger', models.CharField(choices=[('schedule', 'Schedule'), ('manual', 'Manual'), ('backfill', 'Backfill'), ('workflow', 'Workflow')], default='schedule', max_length=16)),
                ('scheduled_for', models.DateTimeField()),
                ('attempt', models.PositiveIntegerField(default=1)),
                ('max_attempts', models.PositiveIntegerField(default=1)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('queued_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True, verbose_name='next attempt')),
                ('publish_count', models.PositiveIntegerField(default=0)),
                ('worker', models.CharField(blank=True, max_length=255)),
                ('output', models.TextField(blank=True)),
                ('output_bytes', models.BigIntegerField(default=0, help_text='Bytes the job wrote, kept or not.', verbose_name='output size (bytes)')),
                ('result', models.JSONField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('reason', models.CharField(blank=True, help_text='Why a run was skipped or cancelled.', max_length=255)),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='jobs.job')),
                ('triggered_by', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('lost_attempts', models.PositiveIntegerField(default=0)),
                ('key_slot', models.DateTimeField(blank=True, help_text="The slot the idempotency key names when it is not the run's own: that of the run this one re-runs.", null=True)),
                ('params', models.JSONField(blank=True, db_default=models.Value('{}'), default=dict)),
                ('waited_seconds', models.FloatField(db_default=0, default=0, help_text="How long the run waited for room under its job's limit, over all its attempts.")),
                ('waiting_since', models.DateTimeField(blank=True, null=True)),
                ('traceparent', models.CharField(blank=True, db_default='', default='', editable=False, max_length=55)),
                ('phase', models.GeneratedField(db_persist=True, expression=models.Case(models.When(django.db.models.lookups.In(models.F('status'), ['queued', 'running']), then=models.Value('live')), models.When(django.db.models.lookups.Exact(models.F('status'), 'succeeded'), then=models.Value(None)), default=models.F('status'), output_field=models.CharField(max_length=16, null=True)), output_field=models.CharField(max_length=16, null=True))),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['job', '-created_at'], name='run_job_recent_idx'), models.Index(fields=['-created_at', '-id'], name='run_recent_idx'), models.Index(condition=models.Q(('triggered_by__isnull', False)), fields=['triggered_by'], name='run_triggered_by_idx'), models.Index(condition=models.Q(('waiting_since__isnull', False)), fields=['job'], name='run_waiting_idx'), models.Index(condition=models.Q(('phase__in', ['failed', 'timed_out', 'lost', 'skipped', 'cancelled'])), fields=['phase', '-created_at'], name='run_unsuccessful_idx'), models.Index(condition=models.Q(('phase__in', ['failed', 'timed_out', 'lost', 'skipped', 'cancelled'])), fields=['job', 'phase', '-created_at', '-id'], name='run_job_unsuccessful_idx'), models.Index(condition=models.Q(('phase__in', ('pending', 'live', 'retrying'))), fields=['phase', 'next_attempt_at'], name='run_active_idx')],
                'constraints': [models.UniqueConstraint(fields=('job', 'scheduled_for'), name='run_one_per_slot'), models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'queued', 'running', 'retrying', 'succeeded', 'failed', 'timed_out', 'lost', 'skipped', 'cancelled'])), name='run_status_valid'), models.CheckConstraint(condition=models.Q(('attempt__gte', 1)), name='run_attempt_positive')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='last_run',
            field=models.ForeignKey(blank=True, editable=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.jobrun'),
        ),
        migrations.AddField(
            model_name='job',
            name='jitter_seconds',
            field=models.PositiveIntegerField(default=0, help_text='Start each scheduled run up to this many seconds after its slot, at random.', verbose_name='jitter (s)'),
        ),
        migrations.AddField(
            model_name='job',
            name='overlap_policy',
            field=models.CharField(choices=[('allow', 'Run both'), ('skip', 'Skip the new slot'), ('queue', 'Start the new slot when the earlier run ends'), ('replace', 'Cancel the earlier run, start the new slot')], default='allow', help_text='What happens when a slot comes due while an earlier run is still queued or running.', max_length=8),
        ),
        migrations.AddField(
            model_name='job',
            name='start_deadline_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='A scheduled run that cannot start within this many seconds of its slot is skipped as missed.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='start deadline (s)'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('start_deadline_seconds__isnull', False)), fields=['start_deadline_seconds'], name='job_start_deadline_idx'),
        ),
        migrations.AddField(
            model_name='job',
            name='cpu_limit_seconds',
            field=models.PositiveIntegerField(blank=True, help_text='Command jobs: the most CPU time each process may use, in seconds.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='CPU time limit (s)'),
        ),
        migrations.AddField(
            model_name='job',
            name='max_open_files',
            field=models.PositiveIntegerField(blank=True, help_text='Command jobs: the most files each process may hold open.', null=True, validators=[django.core.validators.MinValueValidator(8)]),
        ),
        migrations.AddField(
            model_name='job',
            name='max_processes',
            field=models.PositiveIntegerField(blank=True, help_text="Command jobs: the most processes the command's user may have at once (enforced when commands run as an unprivileged user, see JOBS_COMMAND_USER).", null=True, validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AddField(
            model_name='job',
            name='memory_limit_mb',
            field=models.PositiveIntegerField(blank=True, help_text='Command jobs: the most address space (virtual memory) each process may use, in MB.', null=True, validators=[django.core.validators.MinValueValidator(8)], verbose_name='memory limit (MB)'),
        ),
        migrations.AddField(
            model_name='job',
            name='working_directory',
            field=models.CharField(blank=True, help_text='Command jobs: an absolute path to run the command in.', max_length=1024),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('memory_limit_mb__isnull', True), ('memory_limit_mb__gt', 0), _connector='OR'), name='job_memory_limit_mb_positive'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('cpu_limit_seconds__isnull', True), ('cpu_limit_seconds__gt', 0), _connector='OR'), name='job_cpu_limit_seconds_positive'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('max_open_files__isnull', True), ('max_open_files__gt', 0), _connector='OR'), name='job_max_open_files_positive'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('max_processes__isnull', True), ('max_processes__gt', 0), _connector='OR'), name='job_max_processes_positive'),
        ),
        migrations.AddField(
            model_name='job',
            name='retention_days',
            field=models.PositiveIntegerField(blank=True, help_text='Delete finished runs older than this many days; empty means JOBS_RETENTION_DAYS.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='keep runs for (days)'),
        ),
        migrations.AddField(
            model_name='job',
            name='retention_min_runs',
            field=models.PositiveIntegerField(blank=True, help_text='Always keep at least this many of the newest runs; empty means JOBS_RETENTION_MIN_RUNS.', null=True, validators=[django.core.validators.MinValueValidator(1)], verbose_name='keep at least (runs)'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('retention_days__isnull', True), ('retention_days__gt', 0), _connector='OR'), models.Q(('retention_min_runs__isnull', True), ('retention_min_runs__gt', 0), _connector='OR')), name='job_retention_positive'),
        ),
        migrations.AddField(
            model_name='job',
            name='max_lost_attempts',
            field=models.PositiveIntegerField(blank=True, help_text='Attempts lost to the infrastructure (a worker died or was cut off) that are run again at once, apart from max_retries; empty means JOBS_MAX_LOST_ATTEMPTS.', null=True, validators=[django.core.validators.MaxValueValidator(100)], verbose_name='lost attempts run again'),
        ),
        migrations.AddField(
            model_name='job',
            name='secret_environment',
            field=models.JSONField(blank=True, default=dict, help_text='Environment variables for a command job whose values are secret.'),
        ),
        migrations.AddField(
            model_name='job',
            name='secret_http_headers',
            field=models.JSONField(blank=True, default=dict, help_text='HTTP headers whose values are secret (tokens).', verbose_name='secret HTTP headers'),
        ),
        migrations.CreateModel(
            name='RecentRuns',
            fields=[
                ('job', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='jobs.job')),
                ('points', models.JSONField(default=list)),
            ],
        ),
        migrations.CreateModel(
            name='RunEnd',
            fields=[
                ('run_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('job_id', models.BigIntegerField()),
                ('status', models.CharField(max_length=16)),
                ('ended_at', models.DateTimeField()),
                ('seconds', models.FloatField(null=True)),
            ],
        ),
        migrations.CreateModel(
            name='HourCounts',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('succeeded', models.PositiveIntegerField(default=0)),
                ('failed', models.PositiveIntegerField(default=0)),
                ('timed_out', models.PositiveIntegerField(default=0)),
                ('lost', models.PositiveIntegerField(default=0)),
                ('skipped', models.PositiveIntegerField(default=0)),
                ('cancelled', models.PositiveIntegerField(default=0)),
                ('timed', models.PositiveIntegerField(default=0)),
                ('seconds', models.FloatField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('hour',), name='hour_counts_one_per_hour')],
            },
        ),
        migrations.CreateModel(
            name='JobHourCounts',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('succeeded', models.PositiveIntegerField(default=0)),
                ('failed', models.PositiveIntegerField(default=0)),
                ('timed_out', models.PositiveIntegerField(default=0)),
                ('lost', models.PositiveIntegerField(default=0)),
                ('skipped', models.PositiveIntegerField(default=0)),
                ('cancelled', models.PositiveIntegerField(default=0)),
                ('timed', models.PositiveIntegerField(default=0)),
                ('seconds', models.FloatField(default=0)),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('job', 'hour'), name='job_hour_counts_one_per_hour')],
            },
        ),
        migrations.CreateModel(
            name='Lease',
            fields=[
                ('name', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('holder', models.CharField(blank=True, max_length=255)),
                ('epoch', models.BigIntegerField(default=0)),
                ('acquired_at', models.DateTimeField(blank=True, null=True)),
                ('expires_at', models.DateTimeField()),
                ('last_tick_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('epoch__gte', 0)), name='lease_epoch_not_negative')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='priority',
            field=models.PositiveSmallIntegerField(default=5, help_text='0-9, 9 the most urgent: of the runs waiting in a queue, a worker takes the most urgent first.', validators=[django.core.validators.MaxValueValidator(9)]),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('priority__gte', 0), ('priority__lte', 9)), name='job_priority_range'),
        ),
        migrations.CreateModel(
            name='SchedulerOutage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('last_tick_at', models.DateTimeField(blank=True, null=True)),
                ('noticed_at', models.DateTimeField()),
                ('noticed_by', models.CharField(blank=True, max_length=255)),
                ('recovered_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['-noticed_at', '-id'],
                'indexes': [models.Index(condition=models.Q(('recovered_at__isnull', True)), fields=['noticed_at'], name='outage_open_idx')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='slot_check_from',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('enabled', True)), fields=['slot_check_from'], name='job_slot_check_idx'),
        ),
        migrations.AddField(
            model_name='job',
            name='parameters',
            field=models.JSONField(blank=True, default=list, help_text='Run-time parameters: a list of {name, type, default, required, description, choices}; types string, integer, number, boolean, date, datetime, choice.'),
        ),
        migrations.AddField(
            model_name='job',
            name='limit_key',
            field=models.CharField(blank=True, default='', help_text='The key of a limit (/api/limits/) shared with other jobs: its runs wait while the limit is full.', max_length=100, verbose_name='limit'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('limit_key', ''), _negated=True), fields=['limit_key'], name='job_limit_key_idx'),
        ),
        migrations.CreateModel(
            name='Limit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.SlugField(help_text='What jobs name in their limit_key: letters, digits, - and _ (such as warehouse).', max_length=100, unique=True)),
                ('max_running', models.PositiveIntegerField(help_text='At most this many runs of the jobs naming this key running at once.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100000)])),
                ('max_starts_per_minute', models.PositiveIntegerField(blank=True, help_text="At most this many of their runs starting in any 60 seconds (by the database's clock); empty means no rate limit.", null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(10000)])),
                ('description', models.TextField(blank=True)),
                ('recent_starts', models.JSONField(blank=True, default=list, editable=False)),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated')),
            ],
            options={
                'ordering': ['key'],
                'constraints': [models.CheckConstraint(condition=models.Q(('max_running__gte', 1)), name='limit_max_running_positive'), models.CheckConstraint(condition=models.Q(('max_starts_per_minute__isnull', True), ('max_starts_per_minute__gte', 1), _connector='OR'), name='limit_max_starts_positive')],
            },
        ),
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
        migrations.AddField(
            model_name='job',
            name='dst_repeated',
            field=models.CharField(choices=[('first', 'Run it once, at its first occurrence'), ('second', 'Run it once, at its second occurrence'), ('both', 'Run it at both occurrences')], default='first', help_text='A slot whose wall-clock time comes twice (clocks fall back): run it at its first occurrence, its second, or both.', max_length=8, verbose_name='DST: repeated hour'),
        ),
        migrations.AddField(
            model_name='job',
            name='dst_skipped',
            field=models.CharField(choices=[('shift', 'Run it shifted forward by the gap'), ('skip', 'Do not run it')], default='shift', help_text='A slot whose wall-clock time does not exist (clocks jump forward): run it shifted forward by the gap, or skip it.', max_length=8, verbose_name='DST: skipped hour'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('dst_skipped__in', ['shift', 'skip'])), name='job_dst_skipped_valid'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('dst_repeated__in', ['first', 'second', 'both'])), name='job_dst_repeated_valid'),
        ),
        migrations.AddField(
            model_name='job',
            name='business_day_of_month',
            field=models.SmallIntegerField(blank=True, help_text='Only the Nth business day of each month: 1 the first, 3 the third; -1 the last, -2 the one before. Needs business days.', null=True, validators=[django.core.validators.MinValueValidator(-23), django.core.validators.MaxValueValidator(23)]),
        ),
        migrations.AddField(
            model_name='job',
            name='business_days',
            field=models.BooleanField(default=False, help_text='Run on business days only: Monday to Friday, less the dates of the calendars.'),
        ),
        migrations.AddField(
            model_name='job',
            name='calendars',
            field=models.JSONField(blank=True, default=list, help_text='Names of calendars whose dates (holidays, closures) the job skips.'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('business_day_of_month__isnull', True), models.Q(('business_day_of_month__gte', -23), ('business_day_of_month__lte', 23), ('business_days', True), models.Q(('business_day_of_month', 0), _negated=True)), _connector='OR'), name='job_business_day_of_month_valid'),
        ),
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
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('spread__gte', 0), ('spread__lte', 86400)), name='job_spread_range'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('spread', 0), ('spread_offset_seconds', 0)), ('spread_offset_seconds__lt', models.F('spread')), _connector='OR'), name='job_spread_offset_within'),
        ),
        migrations.CreateModel(
            name='JobDayCounts',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('measure', models.CharField(max_length=100)),
                ('count', models.BigIntegerField(default=0)),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('job', 'day', 'measure'), name='job_day_counts_one_per_measure')],
            },
        ),
        migrations.CreateModel(
            name='Calendar',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="How jobs name it (their 'calendars'). Letters, digits, '.', '_' and '-', starting with a letter or a digit, not only digits, at most 100 characters.", max_length=100, unique=True, validators=[django.core.validators.RegexValidator('^(?![0-9]+\\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,99}\\Z', "Letters, digits, '.', '_' and '-', starting with a letter or a digit, not only digits, at most 100 characters.")])),
                ('description', models.TextField(blank=True)),
                ('dates', models.JSONField(blank=True, default=list, help_text='Dates typed in or imported: [{"date": "2026-12-24", "label": "Christmas Eve"}].')),
                ('country', models.CharField(blank=True, help_text='A country code (DE, US, GB...): its public holidays of every year, from the holidays package, are dates of this calendar too.', max_length=3)),
                ('subdivision', models.CharField(blank=True, help_text='A state or region of the country (BE for Berlin), for its own holidays.', max_length=10)),
                ('revision', models.PositiveIntegerField(default=1, editable=False)),
                ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated')),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.CheckConstraint(condition=models.Q(('subdivision', ''), models.Q(('country', ''), _negated=True), _connector='OR'), name='calendar_subdivision_needs_country')],
            },
        ),
        migrations.CreateModel(
            name='JobAttempt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('outcome', models.CharField(choices=[('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('timed_out', 'Timed Out'), ('lost', 'Lost'), ('cancelled', 'Cancelled')], default='running', max_length=16)),
                ('task_id', models.CharField(max_length=255)),
                ('worker', models.CharField(blank=True, max_length=255)),
                ('pid', models.PositiveIntegerField(blank=True, null=True)),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('traceback', models.TextField(blank=True)),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='attempts', to='jobs.jobrun')),
            ],
            options={
                'ordering': ['run', 'number'],
                'constraints': [models.UniqueConstraint(fields=('run', 'number'), name='attempt_one_per_number'), models.CheckConstraint(condition=models.Q(('outcome__in', ['running', 'succeeded', 'failed', 'timed_out', 'lost', 'cancelled'])), name='attempt_outcome_valid')],
                'indexes': [models.Index(fields=['started_at'], name='attempt_started_idx')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='bundle',
            field=models.CharField(choices=[('auto', 'When its recent runs are short'), ('short', 'Also before it has a history (declared short)'), ('never', 'Never: each run its own message')], db_default='auto', default='auto', help_text="When many runs are due together, short ones share a message (a bundle): auto when the job's recent runs are short (JOBS_BUNDLE_SHORT_SECONDS), short to bundle it before it has a history, never to keep each run its own message.", max_length=8),
        ),
        migrations.RunPython(storage_for_postgresql, default_storage),
    ]
