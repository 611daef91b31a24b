"""Publishing: the messages of the ``jobs.execute_run`` task, sent in batches, and the depth of the queues.

A leaf: it imports nothing of the project. A caller hands it ``Message``s (a run's id and attempt,
the queue and the time limits) and it sends them; the task is named by its name string.

``apply_async`` spends about 150 µs of Python on each message and waits for the broker each time;
for a burst of thousands of due jobs that was most of a tick. The messages of our one task differ
only in their id, arguments and time limits, so Celery builds the headers once per process
(``as_task_v2``) and each message is that template filled in. Every message goes through a kombu
producer on a connection of Celery's app (its broker URL and transport options), a batch at a time:

- RabbitMQ: the channel is in confirm mode; the batch is published and the broker's confirms are
  collected once, at its end (``confirm_publish`` would wait for each message in turn). A message
  the broker refuses fails the batch;
- Sentinel: kombu's publish batch, one pipeline round trip per batch;
- plain Redis: the JSON that kombu's Redis transport stores, built here and pushed through one
  pipeline per batch, since kombu's own publish costs 1.6x as much per message (``bench/publishing.py``:
  about 70 against 42 µs a message on the 2-core machine).

``tests/test_publishing.py`` checks on each broker, and for both Redis paths, that a batched message
is the message ``send_task`` sends, field for field, so a Celery or kombu upgrade that changes the
protocol fails there rather than in production. A batch that fails raises: its runs are queued in the database
already, and the monitor publishes again what the broker does not hold.
"""

import base64
import contextlib
import json
import os
import threading
import time
import uuid
from typing import NamedTuple

from celery import current_app
from celery.utils.nodenames import anon_nodename
from django.conf import settings
from kombu import Producer
from kombu.exceptions import ChannelError, OperationalError

TASK_NAME = "jobs.execute_run"
# A bundle: many short runs in one message, run one after another (jobs.worker.bundle).
BUNDLE_TASK_NAME = "jobs.execute_bundle"
# A job's priority: 0-9, 9 the most urgent (jobs.models.Job.priority).
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 5
CONFIRM_TIMEOUT_SECONDS = 30

_EMBED_JSON = json.dumps({"callbacks": None, "errbacks": None, "chain": None, "chord": None})
_local = threading.local()


class Message(NamedTuple):
    """One attempt of one run, as the worker's task receives it."""

    run_id: int
    attempt: int
    queue: str
    time_limit: float
    soft_time_limit: float | None
    priority: int = DEFAULT_PRIORITY  # the job's, 0-9, 9 the most urgent
    headers: dict | None = None  # more message headers: the run's trace context (jobs.telemetry.tracing)
    job_id: int | None = None  # the run's job: whether it may go in a bundle (jobs.lifecycle.bundling)


class Bundle(NamedTuple):
    """Attempts of many runs in one message (``BUNDLE_TASK_NAME``), run one after another: the
    message's time limit is the bundle's; each run keeps its own timeout inside it."""

    runs: tuple  # ((run id, attempt), ...)
    queue: str
    time_limit: float
    soft_time_limit: None = None
    priority: int = DEFAULT_PRIORITY
    headers: None = None


def _args(message):
    """(task name, task id, the task's args as JSON) of a message or a bundle."""
    if isinstance(message, Bundle):
        (first, attempt), size = message.runs[0], len(message.runs)
        runs = ", ".join(f"[{run_id}, {number}]" for run_id, number in message.runs)
        return BUNDLE_TASK_NAME, bundle_task_id(first, attempt, size), f"[[{runs}]]"
    return TASK_NAME, task_id_for(message.run_id, message.attempt), f"[{message.run_id}, {message.attempt}]"


def _body(args):
    """The task's body, JSON: its args, no kwargs, nothing embedded (Celery's protocol 2)."""
    return f"[{args}, {{}}, {_EMBED_JSON}]"


def broker_priority(priority, driver_type):
    """The message priority a broker reads for a job's ``priority`` (9 the most urgent). AMQP puts
    higher numbers first; kombu's Redis transport pops its lower-numbered lists first, so 9 becomes 0."""
    priority = max(0, min(MAX_PRIORITY, int(priority)))
    return priority if driver_type == "amqp" else MAX_PRIORITY - priority


class PublishError(Exception):
    """The broker refused or did not confirm a batch."""


def task_id_for(run_id, attempt):
    return f"run-{run_id}-{attempt}"


def bundle_task_id(first_run_id, attempt, size):
    """A bundle's task id, named by its first run (the run's attempt row keeps it: "ran in a bundle")."""
    return f"bundle-{first_run_id}-{attempt}-{size}"


def is_bundle_task_id(task_id):
    return task_id.startswith("bundle-")


def ignores_result():
    # The run and attempt rows are the record of what ran; JOBS_TASK_RESULTS brings the
    # django-celery-results row back.
    return not settings.JOBS_TASK_RESULTS


def send_one(message):
    """One message through Celery's own ``send_task``: the reference that ``publish``'s messages
    are checked against (tests/test_publishing.py)."""
    app = current_app._get_current_object()
    with app.connection_for_write() as connection:
        priority = broker_priority(message.priority, connection.transport.driver_type)
    name, task_id, args = _args(message)
    app.send_task(
        name, args=json.loads(args), task_id=task_id, queue=message.queue, time_limit=message.time_limit, soft_time_limit=message.soft_time_limit,
        ignore_result=ignores_result(), priority=priority, headers=message.headers,
    )


def publish(messages, batch=1000):
    """Send ``messages``, ``batch`` at a time. A broken connection (the broker restarted or failed
    over since the last batch) is opened again once; then the error is raised."""
    for tries_left in (1, 0):
        try:
            publisher = _publisher()
            for start in range(0, len(messages), batch):
                publisher.send(messages[start:start + batch])
            return
        except PublishError:
            forget()
            raise
        except Exception:
            forget()
            if not tries_left:
                raise


def forget():
    """Drop this thread's connection (a forked child must not share its parent's)."""
    publisher = getattr(_local, "publisher", None)
    _local.publisher = None
    if publisher is not None:
        publisher.close()


def _publisher():
    app = current_app._get_current_object()
    publisher = getattr(_local, "publisher", None)
    if publisher is None or publisher.app is not app:
        forget()
        publisher = _local.publisher = Publisher(app)
    return publisher


class Publisher:
    """One thread's connection, channel and producer on the current app's broker."""

    def __init__(self, app, fast_path=None):
        self.app = app
        # Confirms are collected per batch here; kombu batches Redis writes only when redis-py
        # would not replay a pipeline on a timeout.
        self.connection = app.connection_for_write(
            transport_options={"confirm_publish": False, "retry_on_timeout": False})
        self.connection.ensure_connection(max_retries=1)
        self.channel = self.connection.channel()
        self.producer = Producer(self.channel)
        self.driver_type = self.connection.transport.driver_type
        self.confirms = self.driver_type == "amqp"
        self.fast_path = self.connection.transport_cls in ("redis", "rediss") if fast_path is None else fast_path
        self.declared = set()
        self.headers, self.reply_to = template(app)
        self.envelopes = {}  # (queue, priority, time limits) -> the Redis message's JSON template
        if self.confirms:
            self.published, self.unconfirmed, self.refused = 0, set(), []
            self.channel.events["basic_ack"].add(self._on_ack)
            self.channel.events["basic_nack"].add(self._on_nack)
            self.channel.confirm_select()

    def close(self):
        with contextlib.suppress(Exception):  # closing a connection that may be broken already
            self.connection.release()

    def send(self, messages):
        if self.confirms:
            for message in messages:
                self._publish(message)
                self.published += 1
                self.unconfirmed.add(self.published)
            self._wait_for_confirms()
        elif self.fast_path:
            lists = {}
            for message in messages:
                # The list of the message's priority, named as kombu's Redis transport names it.
                key = self.channel._q_for_pri(message.queue, broker_priority(message.priority, self.driver_type))
                lists.setdefault(key, []).append(self.redis_json(message))
            # One LPUSH of many values a list pushes them in their order, as one LPUSH each would.
            with self.channel.client.pipeline(transaction=False) as pipe:
                for key, values in lists.items():
                    pipe.lpush(key, *values)
                pipe.execute()
        else:
            with self.producer.batch(max_size=len(messages)):
                for message in messages:
                    self._publish(message)

    def _headers(self, message, task_id, name=TASK_NAME, args=None):
        return {**self.headers, "task": name, "id": task_id, "root_id": task_id,
                "timelimit": [message.time_limit, message.soft_time_limit],
                "argsrepr": args, **(message.headers or {})}

    def _publish(self, message):
        name, task_id, args = _args(message)
        declare = None
        if message.queue not in self.declared:
            # The queue as Celery's worker declares it: a quorum queue on RabbitMQ.
            declare = [self.app.amqp.queues[message.queue]]
            self.declared.add(message.queue)
        self.producer.publish(
            _body(args), exchange="", routing_key=message.queue,
            content_type="application/json", content_encoding="utf-8", delivery_mode=2, declare=declare,
            correlation_id=task_id, reply_to=self.reply_to, headers=self._headers(message, task_id, name, args),
            priority=broker_priority(message.priority, self.driver_type),
        )

    def redis_json(self, message):
        """The JSON that kombu's Redis transport stores for this message (the fast path): the
        envelope of its queue, priority and time limits made once, the run's values put in."""
        name, task_id, args = _args(message)
        key = (name, message.queue, message.priority, message.time_limit, message.soft_time_limit)
        envelope = self.envelopes.get(key)
        if envelope is None:
            envelope = self.envelopes[key] = self._redis_envelope(message, name)
        text = envelope.format(body=base64.b64encode(_body(args).encode()).decode(), task_id=task_id,
                               argsrepr=args, tag=uuid.uuid4())
        if message.headers:  # a traced run's message: the template's headers and its own
            fields = json.loads(text)
            fields["headers"].update(message.headers)
            text = json.dumps(fields)
        return text

    def _redis_envelope(self, message, name):
        """The message's JSON as a str.format template: its braces doubled, a marker for each value
        of the run (ASCII that JSON leaves as it is) replaced by a field."""
        markers = {"body": "@BODY@", "task_id": "@TASKID@", "argsrepr": "@ARGSREPR@", "tag": "@TAG@"}
        headers = self._headers(message, markers["task_id"], name, markers["argsrepr"])
        text = json.dumps({
            "body": markers["body"],
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                "correlation_id": markers["task_id"], "reply_to": self.reply_to, "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": message.queue},
                "priority": broker_priority(message.priority, self.driver_type),
                "body_encoding": "base64", "delivery_tag": markers["tag"],
            },
        }).replace("{", "{{").replace("}", "}}")
        for field, marker in markers.items():
            text = text.replace(f'"{marker}"', f'"{{{field}}}"')
        return text

    def _on_ack(self, delivery_tag, multiple):
        if multiple:
            self.unconfirmed = {tag for tag in self.unconfirmed if tag > delivery_tag}
        else:
            self.unconfirmed.discard(delivery_tag)

    def _on_nack(self, delivery_tag, multiple):
        # A nack with ``multiple`` refuses every message not yet confirmed up to its tag.
        self.refused.extend(sorted(tag for tag in self.unconfirmed if tag <= delivery_tag) if multiple
                            else [delivery_tag])
        self._on_ack(delivery_tag, multiple)

    def _wait_for_confirms(self):
        deadline = time.monotonic() + CONFIRM_TIMEOUT_SECONDS
        while self.unconfirmed:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PublishError(f"{len(self.unconfirmed)} message(s) not confirmed within "
                                   f"{CONFIRM_TIMEOUT_SECONDS} s")
            self.connection.drain_events(timeout=left)
        if self.refused:
            refused, self.refused = self.refused, []
            raise PublishError(f"the broker refused {len(refused)} message(s)")


def template(app):
    """The headers every execute_run message shares, and the reply-to of this process."""
    message = app.amqp.as_task_v2("template", TASK_NAME, args=[0, 0], kwargs={}, origin=anon_nodename(),
                                  argsrepr="", kwargsrepr="{}", ignore_result=ignores_result())
    return dict(message.headers), app.thread_oid


def queue_depth(queues):
    """{queue: messages waiting in the broker (not yet taken by a worker)} through the transport:
    Redis counts its lists (priority lists included), RabbitMQ answers a passive declare. A queue
    the broker does not know has 0; every queue has None when the broker does not answer."""
    app = current_app._get_current_object()
    depth = {}
    connection = app.connection_for_read()
    try:
        connection.ensure_connection(max_retries=1)
        channel = connection.channel()
        for name in queues:
            try:
                depth[name] = channel.queue_declare(queue=name, passive=True).message_count
            except (ChannelError, *connection.channel_errors):
                depth[name] = 0  # never declared: no worker consumed it, nothing was published to it
                channel.close()  # RabbitMQ closed it already
                channel = connection.channel()
        channel.close()
    except (OperationalError, *connection.connection_errors, *connection.recoverable_connection_errors, OSError):
        return dict.fromkeys(queues)
    finally:
        connection.release()
    return depth


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: setattr(_local, "publisher", None))
