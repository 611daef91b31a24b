"""Settings for the job orchestration service. Every value can come from the environment."""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from . import broker, process
from .env import (
    checkout_secret,
    env_bool,
    env_choice,
    env_fernet_keys,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_queues,
    env_str,
    home_dir,
    var_dir,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# A checkout keeps var/ and staticfiles/ in itself; the installed service (pip install ., the
# `scheduler` command) in the folder it runs in.
VAR_DIR = var_dir(BASE_DIR)

DEBUG = env_bool("DEBUG", False)
# Unset, the secrets come from the files the quick start made in var/ (checkout_secret), if any.
SECRET_KEY = env_str("SECRET_KEY", checkout_secret(VAR_DIR, "secret_key"))
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set (or DEBUG=true for a local trial; "
                                   "scripts/quickstart.sh keeps one in var/secret_key)")
    SECRET_KEY = "insecure-local-only-key"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [SITE_URL] if SITE_URL.startswith("https://") else [])

# --- HTTPS. On by default with DEBUG off: cookies only over HTTPS, HSTS, redirect to https://.
# The quick start on http://127.0.0.1 sets HTTPS=false. Behind a proxy that ends TLS, name the
# header it sets (SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO) so Django knows a request was HTTPS.
HTTPS = env_bool("HTTPS", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0, 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
_ssl_header = env_str("SECURE_PROXY_SSL_HEADER", "")
SECURE_PROXY_SSL_HEADER = (_ssl_header, "https") if _ssl_header else None
# Addresses of the reverse proxies in front of the service: from them, the client is read from
# X-Forwarded-For (its last address that is not a trusted proxy). Empty: REMOTE_ADDR is the client.
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES", [])

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
    "knox",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "jobs",
    "notifications",
    "audit",
    "workflows",
    "sso",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "scheduler_site.body_cap.BodyCap",  # before anything reads a body (the CSRF check parses forms)
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Names the request's user in the trail's entries about users, groups and permissions.
    "audit.middleware.ActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a login that django-axes refused (locked out) into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "scheduler_site.urls"
WSGI_APPLICATION = "scheduler_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The checkout's templates/; the installed service has them in scheduler_site/templates/.
        "DIRS": [BASE_DIR / "templates", Path(__file__).resolve().parent / "templates"],
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
    # The tests' database is a file beside it (as PostgreSQL's is test_<name>), not SQLite's
    # in-memory default: the locking of a file in WAL mode is what the service runs on.
    _path = Path(_db["NAME"])
    _db["TEST"] = {"NAME": str(_path.with_name(f"test_{_path.name}"))}
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db["CONN_HEALTH_CHECKS"] = True
    # A database out of reach (its host cut off) fails a statement within seconds instead of the
    # minutes of TCP's retransmissions: keepalives for idle connections, tcp_user_timeout for
    # data sent and not acknowledged.
    _db.setdefault("OPTIONS", {}).update(
        connect_timeout=5, keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3,
        tcp_user_timeout=env_int("DATABASE_TCP_TIMEOUT_MS", 10000, 0))
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Also checked for Flower's FLOWER_BASIC_AUTH (scheduler_site.flower). A similarity of 0.5 (Django's
# default is 0.7) refuses a password that is its user name twice ("admin:adminadmin").
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
     "OPTIONS": {"max_similarity": 0.5}},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Logins and API tokens. django-axes counts failed logins (the admin's, the pages', and refused
# API tokens) in the database, per client address and user name together by default: after
# LOGIN_FAILURE_LIMIT of them that pair is refused (429) for LOGIN_LOCKOUT_MINUTES.
# `manage.py axes_reset` lifts every lockout. Refused tokens count under the name "(API token)".
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, 1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, 1))
# Axes' lockout parameters: "," between alternatives, "+" within a combination.
AXES_LOCKOUT_PARAMETERS = [item.split("+") if "+" in item else item
                           for item in env_list("LOGIN_LOCKOUT_BY", ["ip_address+username"])]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "audit.trail.client_address"  # the client behind TRUSTED_PROXIES
# Not in the admin (its bulk action declares no permission): `manage.py axes_list_attempts`, `axes_reset`.
AXES_ENABLE_ADMIN = False
AXES_LOCKOUT_TEMPLATE = "pages/locked_out.html"

# --- Single sign-on through OpenID Connect (mozilla-django-oidc; sso/, docs/guide/security.md). On when
# OIDC_RP_CLIENT_ID is set; local accounts keep working beside it. The provider is an operator's host:
# the calls to it do not go through outbound/'s guard against private addresses.
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_choice("OIDC_RP_SIGN_ALGO", "RS256", ("rs256", "rs384", "rs512", "es256", "es384", "es512",
                                                              "hs256", "hs384", "hs512")).upper()
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
# The claim (in the userinfo answer, else the ID token) listing the user's teams: each named group is
# joined, made if missing, except these protected ones and "Command job runners".
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_PROTECTED_GROUPS = env_list("OIDC_PROTECTED_GROUPS", [])
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 10.0, 0.1)
OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", True)
OIDC_USE_PKCE = True
OIDC_AUTHENTICATION_CALLBACK_URL = "sso:callback"
if OIDC_ENABLED:
    _missing = [name for name in ("OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT")
                if not globals()[name]]
    if OIDC_RP_SIGN_ALGO.startswith(("RS", "ES")) and not OIDC_OP_JWKS_ENDPOINT:
        _missing.append("OIDC_OP_JWKS_ENDPOINT (for OIDC_RP_SIGN_ALGO=" + OIDC_RP_SIGN_ALGO + ")")
    if not OIDC_RP_CLIENT_SECRET:
        _missing.append("OIDC_RP_CLIENT_SECRET")
    if _missing:
        raise ImproperlyConfigured("OIDC_RP_CLIENT_ID turns single sign-on on; it needs " + ", ".join(_missing))
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "sso.backend.TeamsFromClaims"]
# API tokens (Authorization: Token <key>) are kept as SHA-512 hashes (django-rest-knox) and expire
# after API_TOKEN_TTL_DAYS (0: never); jobs.access.tokens.
API_TOKEN_TTL_DAYS = env_int("API_TOKEN_TTL_DAYS", 90, 0)
API_TOKENS_PER_USER = env_int("API_TOKENS_PER_USER", 20, 1)
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=API_TOKEN_TTL_DAYS) if API_TOKEN_TTL_DAYS else None,
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = home_dir(BASE_DIR) / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Public by nature: readable by a proxy serving them, though manage.py writes with umask 077.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage",
                    "OPTIONS": {"file_permissions_mode": 0o644, "directory_permissions_mode": 0o755}},
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
        "jobs.access.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The browsable API without DRF's HTML form (scheduler_site/browsable.py).
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer", "scheduler_site.browsable.Renderer"],
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
        "JobKindEnum": "jobs.kinds.choices",  # a job's kind in several components (a job, one job's view)
        "RunTriggerEnum": "jobs.models.RunTrigger",
        "WorkflowRunStatusEnum": "workflows.models.WorkflowRunStatus",
        "WorkflowTriggerEnum": "workflows.models.WorkflowTrigger",
        "StepStatusEnum": "workflows.models.StepStatus",
    },
}

# --- Jobs: limits and the timings of the at-least-once machinery
JOBS_MAX_TIMEOUT_SECONDS = env_int("JOBS_MAX_TIMEOUT_SECONDS", 6 * 3600, 1)
JOBS_DEFAULT_QUEUE = env_str("JOBS_DEFAULT_QUEUE", "jobs")
# What a run stores of an attempt, each capped (jobs.lifecycle.stored): its output (an http job's
# status line, headers and body together) and its result's JSON at JOBS_OUTPUT_MAX_BYTES, its error
# and traceback at JOBS_ERROR_MAX_BYTES.
JOBS_OUTPUT_MAX_BYTES = env_int("JOBS_OUTPUT_MAX_BYTES", 64 * 1024, 1024)
JOBS_ERROR_MAX_BYTES = env_int("JOBS_ERROR_MAX_BYTES", 8 * 1024, 512)
JOBS_KILL_GRACE_SECONDS = env_float("JOBS_KILL_GRACE_SECONDS", 5.0, 0)
JOBS_HEARTBEAT_SECONDS = env_float("JOBS_HEARTBEAT_SECONDS", 2.0, 0.1)
JOBS_LOST_AFTER_HEARTBEATS = env_int("JOBS_LOST_AFTER_HEARTBEATS", 4, 2)
# An attempt lost to the infrastructure is run again at once, up to this many times per run (a job may
# set its own max_lost_attempts); it does not spend the job's max_retries.
JOBS_MAX_LOST_ATTEMPTS = env_int("JOBS_MAX_LOST_ATTEMPTS", 3, 0)
# A worker that could not heartbeat for this long, and cannot reach the broker either, stops its
# attempts itself (jobs.worker.heartbeats): before the leader declares them lost and runs them elsewhere.
JOBS_FENCE_AFTER_SECONDS = env_float(
    "JOBS_FENCE_AFTER_SECONDS", JOBS_HEARTBEAT_SECONDS * (JOBS_LOST_AFTER_HEARTBEATS - 1), 0.1)
if JOBS_FENCE_AFTER_SECONDS >= JOBS_HEARTBEAT_SECONDS * JOBS_LOST_AFTER_HEARTBEATS:
    raise ImproperlyConfigured(
        f"JOBS_FENCE_AFTER_SECONDS ({JOBS_FENCE_AFTER_SECONDS:g}) must be shorter than the time after which an "
        f"attempt is lost (JOBS_HEARTBEAT_SECONDS x JOBS_LOST_AFTER_HEARTBEATS = "
        f"{JOBS_HEARTBEAT_SECONDS * JOBS_LOST_AFTER_HEARTBEATS:g} s): a cut-off worker must stop first")
# A worker that cannot reach the database to claim a run or record its outcome tries again each
# second for this long (a database restart), rather than failing the task.
JOBS_DATABASE_OUTAGE_SECONDS = env_float("JOBS_DATABASE_OUTAGE_SECONDS", 300.0, 0)
JOBS_REPUBLISH_AFTER_SECONDS = env_float("JOBS_REPUBLISH_AFTER_SECONDS", 120.0, 1)
JOBS_MAX_WAIT_SECONDS = env_float("JOBS_MAX_WAIT_SECONDS", 24 * 3600.0, 1)
JOBS_MONITOR_SECONDS = env_float("JOBS_MONITOR_SECONDS", 5.0, 0.1)
JOBS_TICK_SECONDS = env_float("JOBS_TICK_SECONDS", 1.0, 0.05)
JOBS_DISPATCH_BATCH = env_int("JOBS_DISPATCH_BATCH", 2000, 1)
# Runs of a slot that at least JOBS_DISPATCH_AHEAD_MIN_JOBS jobs share (of those that allow overlap
# and have no jitter) are created this long before it, waiting (pending) until it, then queued in
# bulk: a minute's burst of thousands is queued in a fraction of a second instead of being created
# and published batch by batch after its slot (docs/guide/operator-tools.md). A slot of fewer jobs is
# dispatched at the slot, as with 0 s.
JOBS_DISPATCH_AHEAD_SECONDS = env_float("JOBS_DISPATCH_AHEAD_SECONDS", 10.0, 0)
JOBS_DISPATCH_AHEAD_MIN_JOBS = env_int("JOBS_DISPATCH_AHEAD_MIN_JOBS", 1000, 1)
# Runs published together (a crowded slot, catch-up, a backfill, released retries) go in bundles of
# up to this many runs per message, grouped by queue, when their jobs are short: a job's recent p95
# duration at most JOBS_BUNDLE_SHORT_SECONDS, or its ``bundle`` setting says short before it has a
# history (docs/guide/bundles.md). 0: every run its own message.
JOBS_BUNDLE_MAX_RUNS = env_int("JOBS_BUNDLE_MAX_RUNS", 50, 0)
JOBS_BUNDLE_SHORT_SECONDS = env_float("JOBS_BUNDLE_SHORT_SECONDS", 1.0, 0.01)
JOBS_MISFIRE_GRACE_SECONDS = env_float("JOBS_MISFIRE_GRACE_SECONDS", 60.0, 0)
JOBS_LEADER_TTL_SECONDS = env_float("JOBS_LEADER_TTL_SECONDS", 5.0, 1)
JOBS_LEADER_KEY = env_str("JOBS_LEADER_KEY", "scheduler:leader")
JOBS_NODE_NAME = env_str("JOBS_NODE_NAME", "")
# The workers' watchdog (jobs.worker.watchdog) alerts "scheduler_down" when no scheduler has ticked
# for this long, and "scheduler_recovered" when one ticks again.
JOBS_SCHEDULER_STALE_SECONDS = env_float("JOBS_SCHEDULER_STALE_SECONDS", 120.0, 1)
JOBS_COMMANDS_ENABLED = env_bool("JOBS_COMMANDS_ENABLED", True)
# The queues jobs may use, each for everyone or for some groups: "jobs,reports:analysts|finance".
JOBS_QUEUES = env_queues("JOBS_QUEUES", JOBS_DEFAULT_QUEUE)
# Outbound HTTP (http jobs, Slack, webhooks) reaches public addresses only, and these networks.
JOBS_HTTP_ALLOWED_NETWORKS = env_networks("JOBS_HTTP_ALLOWED_NETWORKS", [])
JOBS_HTTP_MAX_RESPONSE_BYTES = env_int("JOBS_HTTP_MAX_RESPONSE_BYTES", 10 * 1024 * 1024, 1024)
# Fernet keys for jobs' secret values; the first encrypts, all decrypt (jobs.access.secrets).
JOBS_SECRETS_KEYS = env_fernet_keys("JOBS_SECRETS_KEYS", checkout_secret(VAR_DIR, "secrets_key"))
# Operator tools: backfill and slot accounting are bounded; commands drop root (see command_kind).
JOBS_BACKFILL_MAX_SLOTS = env_int("JOBS_BACKFILL_MAX_SLOTS", 1000, 1)
# The most finished runs one bulk rerun (POST /api/runs/rerun/) reruns.
JOBS_RERUN_MAX_RUNS = env_int("JOBS_RERUN_MAX_RUNS", 500, 1)
# Quotas of each user who is not staff (staff, superusers and manage.py without --as have none),
# checked by jobs.actions for every interface; 0 turns one off. Jobs owned; the shortest interval
# of a schedule (a cron expression is checked only above 60 s, its finest step); runs created by
# backfill in any 24 hours.
JOBS_MAX_JOBS_PER_USER = env_int("JOBS_MAX_JOBS_PER_USER", 1000, 0)
JOBS_MIN_INTERVAL_SECONDS_NON_STAFF = env_int("JOBS_MIN_INTERVAL_SECONDS_NON_STAFF", 60, 0)
JOBS_MAX_BACKFILL_RUNS_PER_DAY = env_int("JOBS_MAX_BACKFILL_RUNS_PER_DAY", 1000, 0)
# Workflows owned; runs started in any hour (run now, backfill, workflow runs and re-runs); runs in
# flight (not ended) of the user's jobs or started by them. Over a quota of runs the API answers 429.
JOBS_MAX_WORKFLOWS_PER_USER = env_int("JOBS_MAX_WORKFLOWS_PER_USER", 100, 0)
JOBS_MAX_RUNS_PER_HOUR_PER_USER = env_int("JOBS_MAX_RUNS_PER_HOUR_PER_USER", 1000, 0)
JOBS_MAX_RUNS_IN_FLIGHT_PER_USER = env_int("JOBS_MAX_RUNS_IN_FLIGHT_PER_USER", 100, 0)
# Bounds of a job's fields for users who are not staff: retries, timeout and SLA, priority (0-9),
# and the shortest first retry backoff.
JOBS_MAX_RETRIES_NON_STAFF = env_int("JOBS_MAX_RETRIES_NON_STAFF", 10, 0)
JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF = env_int("JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF", 3600, 1)
JOBS_MAX_PRIORITY_NON_STAFF = env_int("JOBS_MAX_PRIORITY_NON_STAFF", 5, 0)
JOBS_MIN_RETRY_BACKOFF_SECONDS_NON_STAFF = env_float("JOBS_MIN_RETRY_BACKOFF_SECONDS_NON_STAFF", 1.0, 0)
# The largest jobs-as-code file the API takes (a larger request is answered 413); Django reads a
# request body up to DATA_UPLOAD_MAX_MEMORY_SIZE, raised to let such a file through.
JOBS_AS_CODE_MAX_BYTES = env_int("JOBS_AS_CODE_MAX_BYTES", 2 * 1024 * 1024, 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, JOBS_AS_CODE_MAX_BYTES + 64 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
JOBS_SLOT_REPORT_MAX_SLOTS = env_int("JOBS_SLOT_REPORT_MAX_SLOTS", 1000, 1)
# The slots one on-time report may walk one by one (days with a clock change); beyond, a 400.
JOBS_REPORT_MAX_SLOTS = env_int("JOBS_REPORT_MAX_SLOTS", 50000, 1)
# The largest ICS file a calendar imports (docs/guide/calendars.md).
JOBS_CALENDAR_ICS_MAX_BYTES = env_int("JOBS_CALENDAR_ICS_MAX_BYTES", 256 * 1024, 1024)
# The largest request body any page or API call reads (a larger one is a 413 before it is read).
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", max(DATA_UPLOAD_MAX_MEMORY_SIZE,
                                                               JOBS_CALENDAR_ICS_MAX_BYTES + 64 * 1024), 1024)
JOBS_SLOT_CHECK_SECONDS = env_int("JOBS_SLOT_CHECK_SECONDS", 600, 0)  # 0: no periodic check
JOBS_COMMAND_USER = env_str("JOBS_COMMAND_USER", "nobody")
JOBS_COMMANDS_AS_ROOT = env_bool("JOBS_COMMANDS_AS_ROOT", False)
# A worker that is not root cannot change user: its commands would run as the service's own user,
# able to read its files (var/, the database, the keys). They are refused unless this says yes.
JOBS_COMMAND_RUN_AS_SERVICE_USER = env_bool("JOBS_COMMAND_RUN_AS_SERVICE_USER", False)
# Each command in a PID and mount namespace of its own (jobs.kinds.command.isolation): "auto" and
# "namespace" where the host allows it, failing the command where it does not; "off" never.
JOBS_COMMAND_ISOLATION = env_choice("JOBS_COMMAND_ISOLATION", "auto", ("auto", "namespace", "off"))
# Workers are not dumpable (prctl): a command running as the worker's user cannot read its
# /proc/<pid>/environ or memory. Off only to attach a debugger or profiler as that user.
JOBS_WORKER_UNDUMPABLE = env_bool("JOBS_WORKER_UNDUMPABLE", True)
# A command's environment: these of the worker's variables ("*" matches any characters), then the
# job's own, its parameters and the JOB_* ones. JOBS_COMMAND_ENV_EXCLUDE is taken out even when allowed.
JOBS_COMMAND_ENV_ALLOW = env_list("JOBS_COMMAND_ENV_ALLOW", (
    "PATH", "LANG", "LC_*", "TZ", "HOME", "USER", "LOGNAME", "TMPDIR",
))
JOBS_COMMAND_ENV_EXCLUDE = env_list("JOBS_COMMAND_ENV_EXCLUDE", ())
# The rlimits of a command whose job sets none (max_processes, max_open_files); 0: none.
JOBS_COMMAND_RLIMIT_NPROC = env_int("JOBS_COMMAND_RLIMIT_NPROC", 256, 0)
JOBS_COMMAND_RLIMIT_NOFILE = env_int("JOBS_COMMAND_RLIMIT_NOFILE", 1024, 0)
JOBS_CALLABLE_MODULES = env_list("JOBS_CALLABLE_MODULES", ["jobs.builtin"])
# The job kinds (jobs.kinds): each a package exporting KIND; a new kind is a package and its line here.
JOBS_KINDS = env_list("JOBS_KINDS", ["jobs.kinds.callable", "jobs.kinds.task", "jobs.kinds.command", "jobs.kinds.http",
                                     "jobs.kinds.checkin"])
# History: finished runs older than JOBS_RETENTION_DAYS are deleted, keeping at least the newest
# JOBS_RETENTION_MIN_RUNS of each job (a job's own retention_days / retention_min_runs override them),
# by a periodic task every JOBS_RETENTION_INTERVAL_SECONDS (0 turns it off), JOBS_RETENTION_BATCH
# runs per statement.
JOBS_RETENTION_DAYS = env_int("JOBS_RETENTION_DAYS", 30, 1)
JOBS_RETENTION_MIN_RUNS = env_int("JOBS_RETENTION_MIN_RUNS", 100, 1)
JOBS_RETENTION_BATCH = env_int("JOBS_RETENTION_BATCH", 2000, 1)
JOBS_RETENTION_INTERVAL_SECONDS = env_float("JOBS_RETENTION_INTERVAL_SECONDS", 3600.0, 0)
# The audit trail's entries are kept this long, whatever the runs' retention (the same pass prunes them).
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 365, 1)
# The pages' figures: ends of runs the scheduler leader folds per statement (at most 10 a tick).
JOBS_ROLLUP_BATCH = env_int("JOBS_ROLLUP_BATCH", 5000, 1)
# Also store a django-celery-results row per run attempt (the run and attempt rows already hold it all).
JOBS_TASK_RESULTS = env_bool("JOBS_TASK_RESULTS", False)
# The worker's claim and outcome statements are prepared on the server; turn this off behind a
# connection pooler in transaction mode (PgBouncer before 1.21), which cannot keep them.
JOBS_PREPARED_STATEMENTS = env_bool("JOBS_PREPARED_STATEMENTS", True)
# /metrics needs "Authorization: Bearer <METRICS_TOKEN>"; METRICS_ALLOWED_IPS (empty by default)
# lets those addresses scrape without it (e.g. 127.0.0.1 for a Prometheus on the same host).
METRICS_TOKEN = env_str("METRICS_TOKEN", checkout_secret(VAR_DIR, "metrics_token"))
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", [])
NOTIFY_DIGEST_THRESHOLD = env_int("NOTIFY_DIGEST_THRESHOLD", 20, 1)
NOTIFY_HTTP_TIMEOUT_SECONDS = env_float("NOTIFY_HTTP_TIMEOUT_SECONDS", 5.0, 0.1)
# Where the paging channels send (notifications/channels/pagerduty, opsgenie).
NOTIFY_PAGERDUTY_URL = env_str("NOTIFY_PAGERDUTY_URL", "https://events.pagerduty.com/v2/enqueue")
NOTIFY_OPSGENIE_URL = env_str("NOTIFY_OPSGENIE_URL", "https://api.opsgenie.com")
# Test sends a user may make in a minute (each is an audit entry); over it, 429. 0: no bound.
NOTIFY_TEST_SENDS_PER_MINUTE = env_int("NOTIFY_TEST_SENDS_PER_MINUTE", 5, 0)
# Check-in pings (/ping/<uuid>, jobs/api/pings.py): a body longer than JOBS_PING_BODY_BYTES is cut, never
# refused; over JOBS_PING_RATE_PER_URL pings a minute to one ping URL, or JOBS_PING_RATE_PER_ADDRESS from
# one client address, the answer is 429 (0: no bound). They are counted in the Redis of
# JOBS_PING_CACHE_URL (REDIS_URL when unset), where they wait for the scheduler leader to record them;
# with none, counted in each web process's memory and recorded in their requests.
JOBS_PING_BODY_BYTES = env_int("JOBS_PING_BODY_BYTES", 10_000, 0)
JOBS_PING_RATE_PER_URL = env_int("JOBS_PING_RATE_PER_URL", 60, 0)
JOBS_PING_RATE_PER_ADDRESS = env_int("JOBS_PING_RATE_PER_ADDRESS", 6000, 0)
# Pings wait in a queue in that Redis for the scheduler leader to record them; past this many waiting, a
# ping is answered 503 (curl --retry tries again).
JOBS_PING_QUEUE_MAX = env_int("JOBS_PING_QUEUE_MAX", 100_000, 1)
JOBS_PING_CACHE_URL = env_str("JOBS_PING_CACHE_URL", env_str("REDIS_URL", checkout_secret(VAR_DIR, "redis_url")))
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # A Redis that does not answer costs a ping (503) or the leader's drain 2 s, never a hung request or tick.
    "pings": ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": JOBS_PING_CACHE_URL,
               "KEY_PREFIX": "pings", "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2}}
              if JOBS_PING_CACHE_URL
              else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "pings"}),
}

# --- Celery: settings for at-least-once delivery
# One variable chooses the broker (scheduler_site/broker.py); REDIS_URL is the broker when it is unset.
_broker_variable = "CELERY_BROKER_URL" if env_str("CELERY_BROKER_URL", "") else "REDIS_URL"
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", JOBS_MAX_TIMEOUT_SECONDS + 3600, 1)
# The quick start's own Redis, with its password, when scripts/quickstart.sh made one (var/redis_url).
CELERY_BROKER_URL = env_str(_broker_variable, checkout_secret(VAR_DIR, "redis_url") or "redis://127.0.0.1:6379/0")
BROKER_KIND = broker.kind_of(CELERY_BROKER_URL, _broker_variable)
globals().update(broker.celery_settings(
    CELERY_BROKER_URL, variable=_broker_variable,
    master_name=env_str("CELERY_SENTINEL_MASTER_NAME", ""), visibility_timeout=CELERY_VISIBILITY_TIMEOUT,
    max_timeout=JOBS_MAX_TIMEOUT_SECONDS, kill_grace=JOBS_KILL_GRACE_SECONDS,
    # RabbitMQ: classic queues with x-max-priority (priorities honoured, one node) instead of quorum queues.
    priority_queues=env_bool("JOBS_RABBITMQ_PRIORITY_QUEUES", False),
))  # CELERY_BROKER_TRANSPORT_OPTIONS, and the queue types on RabbitMQ
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
# Celery's remote control (inspect, revoke, rate_limit, shutdown...) lets whoever reaches the broker
# steer every worker: the workers answer none of it unless an operator turns it on (Flower's worker
# pages and buttons need it). Celery's own switch stays on, its mailbox unanswered instead
# (scheduler_site.remote_control): that mailbox's consumer is what notices a broker gone while every
# pool process is busy (a Redis worker then watches no other connection, and never consumed again:
# tests/chaos/test_broker_faults.py).
JOBS_REMOTE_CONTROL = env_bool("CELERY_WORKER_ENABLE_REMOTE_CONTROL", False)
CELERY_WORKER_ENABLE_REMOTE_CONTROL = True
# Celery's Django fixup closes every database connection before and after each task unless this is
# set: a new connection (~3 ms here) per run. The task_prerun handler in jobs.worker.signals already drops
# connections past CONN_MAX_AGE or broken by a database restart; this reopens one every 1,000 tasks.
CELERY_DB_REUSE_MAX = 1000
CELERY_RESULT_EXPIRES = env_int("CELERY_RESULT_EXPIRES_SECONDS", 7 * 24 * 3600, 60)
CELERY_BEAT_SCHEDULER = "jobs.scheduling.scheduler:JobScheduler"
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
# The Procfile starts Flower on FLOWER_PORT (on 127.0.0.1): the links go there unless FLOWER_URL says
# where Flower is reached from (behind a proxy, on another host).
FLOWER_PORT = env_int("FLOWER_PORT", 5555, minimum=1)
FLOWER_URL = env_str("FLOWER_URL", f"http://127.0.0.1:{FLOWER_PORT}")

# --- Observability (docs/guide/observability.md): logs, traces, error tracking

# text: one line per record; json: one JSON object per line (python-json-logger), with the run_id,
# job and attempt of the run a record is about (jobs.telemetry.logs), from every process.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ["text", "json"])
LOG_FIELDS = "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"
LOGGING_CONFIG = "jobs.telemetry.logs.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run": {"()": "jobs.telemetry.logs.RunFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "pythonjsonlogger.json.JsonFormatter", "fmt": LOG_FIELDS,
                 "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["run"],
                             "formatter": "json" if LOG_FORMAT == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Traces: on when the standard OpenTelemetry variables ask for them (an OTLP endpoint, or a traces
# exporter other than "none"); the SDK reads the others itself (OTEL_EXPORTER_OTLP_HEADERS,
# OTEL_SERVICE_NAME, OTEL_BSP_*...). Off, nothing of OpenTelemetry is imported.
OTEL_SDK_DISABLED = env_bool("OTEL_SDK_DISABLED", False)
OTEL_TRACES_EXPORTER = env_str("OTEL_TRACES_EXPORTER", "").lower()
if OTEL_TRACES_EXPORTER not in ("", "otlp", "console", "none"):
    raise ImproperlyConfigured("OTEL_TRACES_EXPORTER must be otlp, console or none (traces go out over OTLP/HTTP), "
                               f"got {OTEL_TRACES_EXPORTER!r}")
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
JOBS_TRACING = not OTEL_SDK_DISABLED and (
    OTEL_TRACES_EXPORTER not in ("", "none") if OTEL_TRACES_EXPORTER
    else bool(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT))

# Error tracking: SENTRY_DSN turns on sentry-sdk with its Django and Celery integrations; what is
# sent is scrubbed of secrets first (scheduler_site.error_tracking). Off, sentry_sdk is not imported.
SENTRY_DSN = env_str("SENTRY_DSN", "")
SENTRY_ENVIRONMENT = env_str("SENTRY_ENVIRONMENT", "production")
SENTRY_SAMPLE_RATE = env_float("SENTRY_SAMPLE_RATE", 1.0, 0.0)
if SENTRY_SAMPLE_RATE > 1:
    raise ImproperlyConfigured(f"SENTRY_SAMPLE_RATE must be between 0 and 1, got {SENTRY_SAMPLE_RATE}")
if SENTRY_DSN:
    from .error_tracking import start as start_error_tracking

    start_error_tracking(SENTRY_DSN, environment=SENTRY_ENVIRONMENT, sample_rate=SENTRY_SAMPLE_RATE)

# var/ (the quick start's folder) and its files are the service's user's alone, even where an
# earlier version left them readable (scheduler_site.process).
process.secure_var_dir(VAR_DIR)
