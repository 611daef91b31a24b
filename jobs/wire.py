"""Messages of the ``jobs.execute_run`` task, built and sent in bulk for the scheduler.

``apply_async`` spends about 150 µs of Python on each message (routing, configuration lookups,
kombu's publish wrapper) and, on Redis, one round trip; for a burst of thousands of due jobs that
was most of a tick. The message of our one task differs from run to run only in its id, its
arguments and its time limits, so Celery builds the headers once per process (``as_task_v2``)
and each run's message is that template filled in, pushed through one Redis pipeline per batch.
``tests/test_wire.py`` checks that the result is the message ``apply_async`` sends, field for
field, so a Celery upgrade that changes the protocol fails there rather than in production.
"""

import base64
import json
import threading
import uuid

import redis
from celery.utils.nodenames import anon_nodename
from django.conf import settings

from .models import task_id_for

_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
_local = threading.local()


def _template():
    from .tasks import execute_run

    app = execute_run.app
    message = app.amqp.as_task_v2("template", execute_run.name, args=[0, 0], kwargs={}, origin=anon_nodename(),
                                  argsrepr="", kwargsrepr="{}", ignore_result=execute_run.ignore_result)
    return dict(message.headers), app.thread_oid


def encode(run_id, attempt, queue, time_limit, soft_time_limit):
    """The JSON that kombu's Redis transport stores for this attempt's task message."""
    if getattr(_local, "template", None) is None:
        _local.template = _template()
    headers, reply_to = _local.template
    task_id = task_id_for(run_id, attempt)
    body = json.dumps([[run_id, attempt], {}, _EMBED]).encode()
    return json.dumps({
        "body": base64.b64encode(body).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {**headers, "id": task_id, "root_id": task_id, "timelimit": [time_limit, soft_time_limit],
                    "argsrepr": f"[{run_id}, {attempt}]"},
        "properties": {
            "correlation_id": task_id, "reply_to": reply_to, "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
            "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
        },
    })


def send(messages, batch=1000):
    """LPUSH (queue, encoded message) pairs, one pipeline round trip per ``batch``.

    A failure raises after dropping this thread's client; the runs are queued in the database
    already, and the monitor publishes again what the broker does not hold.
    """
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=10,
                                                      socket_connect_timeout=5)
    try:
        for start in range(0, len(messages), batch):
            pipe = client.pipeline(transaction=False)
            for queue, message in messages[start:start + batch]:
                pipe.lpush(queue, message)
            pipe.execute()
    except Exception:
        _local.client = None
        client.close()
        raise
