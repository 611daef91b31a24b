"""What a process of the service imports as it starts (``django.setup()``, then the worker's, beat's
and the web's modules), each check in a fresh Python: OpenTelemetry's SDK and exporters only when
tracing is configured, Sentry only with a DSN, ``holidays`` and ``icalendar`` only when a calendar
needs them, and the shared schemas (Django REST framework's serializers) only when a jobs-as-code file
is first read or written (bench/process_start.py measures what a start costs)."""

import json
import os
import subprocess
import sys

from .conftest import REPO

# redis-py 8 imports OpenTelemetry's API in every process (redis.observability): the SDK is what costs.
LAZY = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation", "sentry_sdk", "holidays",
        "icalendar")
LOADED = """
import json, sys
def loaded(names): return sorted(m for m in sys.modules if m.startswith(names))
import django
django.setup()
after_setup = loaded(("rest_framework.serializers", "drf_spectacular.plumbing", "jobs.api", "jobs.schemas",
                      "notifications.schemas", "jobs.as_code."))
import jobs.worker.task, jobs.scheduling.dispatch, jobs.lifecycle, jobs.kinds.http, notifications.sending
import scheduler_site.celery, scheduler_site.urls
print(json.dumps({"after_setup": after_setup, "lazy": loaded(tuple(sys.argv[1:]))}))
"""


def loaded_in_a_fresh_process(**env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SENTRY_"))}
    out = subprocess.run([sys.executable, "-c", LOADED, *LAZY], env={**environ, **env}, cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_process_imports_tracing_sentry_the_calendars_libraries_and_the_api_only_when_it_needs_them():
    off = loaded_in_a_fresh_process()
    assert off == {"after_setup": [], "lazy": []}
    on = loaded_in_a_fresh_process(OTEL_TRACES_EXPORTER="console", SENTRY_DSN="https://key@127.0.0.1:9/1")["lazy"]
    assert "opentelemetry.sdk.trace" in on and "sentry_sdk" in on  # the same check sees them when on


def test_the_sections_of_a_jobs_as_code_file_come_in_their_order_once_imported():
    from jobs.as_code import files

    assert list(files.sections()) == ["limits", "calendars", "windows", "jobs", "channels", "rules", "workflows"]
