"""The stock baseline for bench/throughput.py: a bare Celery app with a no-op task and the same
delivery settings as the service (acks_late, reject_on_worker_lost, prefetch 1, JSON, the same
Redis and visibility timeout), and nothing else: no database, no result backend.

    celery -A bench.rawcelery worker -c 2 -P prefork -Q rawbench
"""

import os

from celery import Celery

app = Celery("rawbench", broker=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"))
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_acks_on_failure_or_timeout=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    accept_content=["json"],
    task_default_queue="rawbench",
    broker_transport_options={"visibility_timeout": 6 * 3600 + 3600, "socket_timeout": 10,
                              "socket_connect_timeout": 5, "health_check_interval": 10, "retry_on_timeout": True},
    broker_connection_retry_on_startup=True,
)


@app.task(name="bench.noop")
def noop(run_id, attempt):
    return None


@app.task(name="bench.stamp")
def stamp(sent_at):
    """For bench/latency.py: how long from publish to a pool process starting the task."""
    import time

    import redis

    redis.Redis.from_url(app.conf.broker_url).rpush("bench:stamps", time.time() - sent_at)
