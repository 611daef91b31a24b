"""Settings for the job orchestration service. Every value can come from the environment."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_float, env_int, env_list, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set (or DEBUG=true for a local trial)")
    SECRET_KEY = "insecure-local-only-key"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "django_celery_results",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "jobs",
    "notifications",
    "audit",
    "workflows",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "scheduler_site.urls"
WSGI_APPLICATION = "scheduler_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: SQLite for a zero-setup trial, PostgreSQL in production and in the tests.
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'scheduler.sqlite3'}")
try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, 0))
except Exception as exc:  # dj_database_url raises several types for a bad URL
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets web, beat and a worker read while one of them writes; the busy timeout makes a
    # writer wait for the lock instead of failing at once.
    _db["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    _db["CONN_MAX_AGE"] = 0
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db["CONN_HEALTH_CHECKS"] = True
    _db.setdefault("OPTIONS", {})["connect_timeout"] = 5
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# The pages' own login (the admin's accepts staff only).
LOGIN_URL = "pages:login"
LOGIN_REDIRECT_URL = "pages:overview"

# --- Email (notifications)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, 1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, 1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "scheduler@localhost")

# --- REST API
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Job scheduler API",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Runs, workflow runs and workflow steps each have a status (and a trigger) of their own.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "jobs.models.RunStatus",
        "RunTriggerEnum": "jobs.models.RunTrigger",
        "WorkflowRunStatusEnum": "workflows.models.WorkflowRunStatus",
        "WorkflowTriggerEnum": "workflows.models.WorkflowTrigger",
        "StepStatusEnum": "workflows.models.StepStatus",
    },
}

# --- Jobs: limits and the timings of the at-least-once machinery
JOBS_MAX_TIMEOUT_SECONDS = env_int("JOBS_MAX_TIMEOUT_SECONDS", 6 * 3600, 1)
JOBS_DEFAULT_QUEUE = env_str("JOBS_DEFAULT_QUEUE", "jobs")
JOBS_OUTPUT_MAX_BYTES = env_int("JOBS_OUTPUT_MAX_BYTES", 64 * 1024, 1024)
JOBS_KILL_GRACE_SECONDS = env_float("JOBS_KILL_GRACE_SECONDS", 5.0, 0)
JOBS_HEARTBEAT_SECONDS = env_float("JOBS_HEARTBEAT_SECONDS", 5.0, 0.1)
JOBS_LOST_AFTER_HEARTBEATS = env_int("JOBS_LOST_AFTER_HEARTBEATS", 3, 2)
JOBS_REPUBLISH_AFTER_SECONDS = env_float("JOBS_REPUBLISH_AFTER_SECONDS", 120.0, 1)
JOBS_MAX_WAIT_SECONDS = env_float("JOBS_MAX_WAIT_SECONDS", 24 * 3600.0, 1)
JOBS_MONITOR_SECONDS = env_float("JOBS_MONITOR_SECONDS", 5.0, 0.1)
JOBS_TICK_SECONDS = env_float("JOBS_TICK_SECONDS", 1.0, 0.05)
JOBS_DISPATCH_BATCH = env_int("JOBS_DISPATCH_BATCH", 2000, 1)
JOBS_MISFIRE_GRACE_SECONDS = env_float("JOBS_MISFIRE_GRACE_SECONDS", 60.0, 0)
JOBS_LEADER_TTL_SECONDS = env_float("JOBS_LEADER_TTL_SECONDS", 5.0, 1)
JOBS_LEADER_KEY = env_str("JOBS_LEADER_KEY", "scheduler:leader")
JOBS_NODE_NAME = env_str("JOBS_NODE_NAME", "")
JOBS_COMMANDS_ENABLED = env_bool("JOBS_COMMANDS_ENABLED", True)
# Operator tools: backfill and slot accounting are bounded; commands drop root (see command_kind).
JOBS_BACKFILL_MAX_SLOTS = env_int("JOBS_BACKFILL_MAX_SLOTS", 1000, 1)
JOBS_SLOT_REPORT_MAX_SLOTS = env_int("JOBS_SLOT_REPORT_MAX_SLOTS", 1000, 1)
JOBS_SLOT_CHECK_SECONDS = env_int("JOBS_SLOT_CHECK_SECONDS", 600, 0)  # 0: no periodic check
JOBS_COMMAND_USER = env_str("JOBS_COMMAND_USER", "nobody")
JOBS_COMMANDS_AS_ROOT = env_bool("JOBS_COMMANDS_AS_ROOT", False)
# The service's own secrets stay out of a command's environment (a job passes what it needs in
# its own `environment`).
JOBS_COMMAND_ENV_EXCLUDE = env_list("JOBS_COMMAND_ENV_EXCLUDE", (
    "SECRET_KEY", "DATABASE_URL", "TEST_DATABASE_URL", "REDIS_URL", "TEST_REDIS_URL", "EMAIL_HOST_PASSWORD",
    "METRICS_TOKEN", "FLOWER_BASIC_AUTH", "ADMIN_PASSWORD", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND",
))
JOBS_CALLABLE_MODULES = env_list("JOBS_CALLABLE_MODULES", ["jobs.builtin"])
# History: finished runs older than JOBS_RETENTION_DAYS are deleted, keeping at least the newest
# JOBS_RETENTION_MIN_RUNS of each job (a job's own retention_days / retention_min_runs override them),
# by a periodic task every JOBS_RETENTION_INTERVAL_SECONDS (0 turns it off), JOBS_RETENTION_BATCH
# runs per statement.
JOBS_RETENTION_DAYS = env_int("JOBS_RETENTION_DAYS", 30, 1)
JOBS_RETENTION_MIN_RUNS = env_int("JOBS_RETENTION_MIN_RUNS", 100, 1)
JOBS_RETENTION_BATCH = env_int("JOBS_RETENTION_BATCH", 2000, 1)
JOBS_RETENTION_INTERVAL_SECONDS = env_float("JOBS_RETENTION_INTERVAL_SECONDS", 3600.0, 0)
# Also store a django-celery-results row per run attempt (the run and attempt rows already hold it all).
JOBS_TASK_RESULTS = env_bool("JOBS_TASK_RESULTS", False)
# The worker's claim and outcome statements are prepared on the server; turn this off behind a
# connection pooler in transaction mode (PgBouncer before 1.21), which cannot keep them.
JOBS_PREPARED_STATEMENTS = env_bool("JOBS_PREPARED_STATEMENTS", True)
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", ["127.0.0.1", "::1"])
NOTIFY_DIGEST_THRESHOLD = env_int("NOTIFY_DIGEST_THRESHOLD", 20, 1)
NOTIFY_HTTP_TIMEOUT_SECONDS = env_float("NOTIFY_HTTP_TIMEOUT_SECONDS", 5.0, 0.1)

# --- Celery: settings for at-least-once delivery
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", ("redis", "rediss"))
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = "django-db"
CELERY_RESULT_EXTENDED = True
CELERY_CACHE_BACKEND = "django-cache"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_DEFAULT_QUEUE = JOBS_DEFAULT_QUEUE
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Celery's Django fixup closes every database connection before and after each task unless this is
# set: a new connection (~3 ms here) per run. The task_prerun handler in jobs.signals already drops
# connections past CONN_MAX_AGE or broken by a database restart; this reopens one every 1,000 tasks.
CELERY_DB_REUSE_MAX = 1000
CELERY_RESULT_EXPIRES = env_int("CELERY_RESULT_EXPIRES_SECONDS", 7 * 24 * 3600, 60)
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", JOBS_MAX_TIMEOUT_SECONDS + 3600, 1)
if CELERY_VISIBILITY_TIMEOUT <= JOBS_MAX_TIMEOUT_SECONDS + JOBS_KILL_GRACE_SECONDS:
    # A message still unacked when the visibility timeout expires is delivered again while the
    # first delivery is still running: the timeout must outlast the longest allowed run.
    raise ImproperlyConfigured(
        f"CELERY_VISIBILITY_TIMEOUT ({CELERY_VISIBILITY_TIMEOUT}s) must be longer than "
        f"JOBS_MAX_TIMEOUT_SECONDS ({JOBS_MAX_TIMEOUT_SECONDS}s) plus the kill grace"
    )
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "socket_timeout": 10,
    "socket_connect_timeout": 5,
    "health_check_interval": 10,
    "retry_on_timeout": True,
}
CELERY_BEAT_SCHEDULER = "jobs.scheduler:JobScheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = 5
# Ordinary periodic tasks, installed as django-celery-beat PeriodicTasks and sent by the leader only.
CELERY_BEAT_SCHEDULE = {}
if JOBS_RETENTION_INTERVAL_SECONDS > 0:
    CELERY_BEAT_SCHEDULE["jobs-prune-runs"] = {
        "task": "jobs.prune_runs",
        "schedule": JOBS_RETENTION_INTERVAL_SECONDS,
        "options": {"queue": JOBS_DEFAULT_QUEUE, "expires": JOBS_RETENTION_INTERVAL_SECONDS},
    }

# --- Flower
FLOWER_URL = env_str("FLOWER_URL", "http://127.0.0.1:5555")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
