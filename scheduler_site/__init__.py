import sys

# redis-py 8 imports OpenTelemetry's metrics SDK whenever it is installed (redis.observability), for
# metrics of its own that stay off unless a program turns them on; the service never does. Imported
# here first, redis is told the SDK is missing: each process starts without it (about 0.05 CPU-seconds).
# The celery command imports redis before this (through Flower's plugin), so a worker and beat still
# load it; traces import the SDK they need as before (jobs.telemetry.tracing).
if "redis" not in sys.modules and "opentelemetry.sdk.metrics" not in sys.modules:
    sys.modules["opentelemetry.sdk.metrics"] = None  # an ImportError for redis's optional import
    try:
        import redis  # noqa: F401
    finally:
        del sys.modules["opentelemetry.sdk.metrics"]

from .celery import app as celery_app

__all__ = ("celery_app",)
