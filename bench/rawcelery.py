"""The stock baseline for bench/throughput.py: a bare Celery app with a no-op task and the same
delivery settings as the service (acks_late, reject_on_worker_lost, prefetch 1, JSON; the same broker
options: Redis' visibility timeout, RabbitMQ's quorum queues and publisher confirms), and nothing
else: no database, no result backend. The broker is CELERY_BROKER_URL, else REDIS_URL.

    celery -A bench.rawcelery worker -c 2 -P prefork -Q rawbench
"""

import importlib.util
import os
from pathlib import Path

from celery import Celery


def _service_broker_options():
    """scheduler_site/broker.py alone: the service's options for each broker, without its app."""
    path = Path(__file__).resolve().parent.parent / "scheduler_site" / "broker.py"
    spec = importlib.util.spec_from_file_location("service_broker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


broker = _service_broker_options()


def make_app(url):
    app = Celery("rawbench", broker=url)
    options = broker.celery_settings(url, variable="CELERY_BROKER_URL", master_name=os.environ.get(
        "CELERY_SENTINEL_MASTER_NAME", ""), visibility_timeout=6 * 3600 + 3600, max_timeout=6 * 3600, kill_grace=5)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue="rawbench",
        broker_connection_retry_on_startup=True,
        **{name.removeprefix("CELERY_").lower(): value for name, value in options.items()},
    )
    return app


app = make_app(os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"))


@app.task(name="bench.noop")
def noop(run_id, attempt):
    return None


@app.task(name="bench.stamp")
def stamp(sent_at):
    """For bench/latency.py: how long from publish to a pool process starting the task."""
    import time

    import redis

    redis.Redis.from_url(app.conf.broker_url).rpush("bench:stamps", time.time() - sent_at)


@app.task(name="bench.true")
def true(run_id, attempt):
    """For bench/burst.py --kind command: the command `true` forked, as a command job runs it."""
    import subprocess

    subprocess.run(["true"], check=True)
