"""A bad configuration value stops the service at start with a message naming the variable."""

import os
import subprocess
import sys

import pytest

from .conftest import REPO

# Like every test that starts processes, once, on PostgreSQL (each starts a fresh Python with its settings).
pytestmark = pytest.mark.postgres("starts a process per configuration")


def start_with(**env):
    full = {**os.environ, "SECRET_KEY": "x", **env}
    return subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JOBS_HEARTBEAT_SECONDS": "often"}, "JOBS_HEARTBEAT_SECONDS must be a number"),
        ({"DEBUG": "maybe"}, "DEBUG must be a boolean"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL must be a broker URL starting with one of redis://"),
        ({"CELERY_BROKER_URL": "kafka://127.0.0.1:9092"},
         "CELERY_BROKER_URL must be a broker URL starting with one of redis://, rediss://, sentinel://, amqp://"),
        ({"CELERY_BROKER_URL": "sentinel://127.0.0.1:26379;sentinel://127.0.0.1:26380"},
         "set CELERY_SENTINEL_MASTER_NAME to the name of the master the sentinels watch"),
        ({"CELERY_BROKER_URL": "sentinel://127.0.0.1:26379", "CELERY_SENTINEL_MASTER_NAME": "main",
          "JOBS_MAX_TIMEOUT_SECONDS": "7200", "CELERY_VISIBILITY_TIMEOUT": "3600"},
         "CELERY_VISIBILITY_TIMEOUT (3600s) must be longer than JOBS_MAX_TIMEOUT_SECONDS (7200s)"),
        ({"JOBS_MAX_TIMEOUT_SECONDS": "7200", "CELERY_VISIBILITY_TIMEOUT": "3600"},
         "CELERY_VISIBILITY_TIMEOUT (3600s) must be longer than JOBS_MAX_TIMEOUT_SECONDS (7200s)"),
        ({"SECRET_KEY": "", "DEBUG": "false"}, "SECRET_KEY must be set"),
        ({"JOBS_RETENTION_MIN_RUNS": "0"}, "JOBS_RETENTION_MIN_RUNS must be at least 1, got 0"),
        ({"JOBS_RETENTION_DAYS": "a month"}, "JOBS_RETENTION_DAYS must be a whole number"),
        ({"JOBS_COMMAND_ISOLATION": "sandbox"},
         "JOBS_COMMAND_ISOLATION must be one of auto, namespace, off, got 'sandbox'"),
        ({"LOG_FORMAT": "yaml"}, "LOG_FORMAT must be one of text, json, got 'yaml'"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER must be otlp, console or none"),
        ({"SENTRY_SAMPLE_RATE": "2"}, "SENTRY_SAMPLE_RATE must be between 0 and 1, got 2.0"),
        ({"SENTRY_SAMPLE_RATE": "often"}, "SENTRY_SAMPLE_RATE must be a number"),
    ],
)
def test_it_refuses_to_start_with_a_bad_value(env, message):
    result = start_with(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_a_visibility_timeout_matters_on_redis_only():
    # RabbitMQ has no visibility timeout (its consumer_timeout is the broker's own setting).
    result = start_with(CELERY_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//", JOBS_MAX_TIMEOUT_SECONDS="7200",
                        CELERY_VISIBILITY_TIMEOUT="3600", DATABASE_URL="sqlite:///tmp-never-created.sqlite3")
    assert result.returncode == 0, result.stderr


def test_it_starts_with_the_defaults():
    result = start_with(DATABASE_URL="sqlite:///tmp-never-created.sqlite3")
    assert result.returncode == 0, result.stderr


def test_a_web_worker_leaves_what_it_loaded_at_start_out_of_the_collectors_passes():
    # The pages' p95 at 10,000,000 runs depends on it (docs/BENCHMARKS.md: the jobs list).
    full = {**os.environ, "SECRET_KEY": "x", "DATABASE_URL": "sqlite:///tmp-never-created.sqlite3"}
    result = subprocess.run([sys.executable, "-c", "import gc, scheduler_site.wsgi; print(gc.get_freeze_count())"],
                            cwd=REPO, env=full, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 50_000  # Django, the apps and their modules: about 110,000 objects
