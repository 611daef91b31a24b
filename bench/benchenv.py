"""The common start of the benchmark scripts: the repository on ``sys.path`` and Django set up with
the service's settings. Scripts run as ``python bench/<name>.py``, so this module is importable."""

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def setup(**env):
    """Set ``env`` (the script's own settings) in the environment, set up Django; the repository root."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("HTTPS", "false")  # requests go over plain http (bench/pages.py's test client)
    os.environ.update(env)
    import django

    django.setup()
    return REPO


def parser(doc, **options):
    """The command line of a benchmark: its docstring as the help, and ``options`` each ``--name``
    with its default (the value's type; a list: one or more; False: a flag; None: text), or
    ``(default, help)``."""
    found = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, option in options.items():
        default, text = option if isinstance(option, tuple) else (option, None)
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            found.add_argument(flag, action="store_true", help=text)
        elif isinstance(default, list):
            found.add_argument(flag, type=type(default[0]), nargs="+", default=default, help=text)
        else:
            found.add_argument(flag, type=str if default is None else type(default), default=default, help=text)
    return found


def arguments(doc, **options):
    """The command line parsed (see ``parser``)."""
    return parser(doc, **options).parse_args()


def add_broker_option(parser):
    parser.add_argument("--broker", nargs="+", default=["redis"], metavar="NAME",
                        help="redis (REDIS_URL), rabbitmq (a private node) or a broker URL; several in one invocation")


def each_broker(names):
    """Point this process at each broker of ``names`` in turn (see ``brokers``), yielding its label;
    a private node is stopped once all were run."""
    with contextlib.ExitStack() as stack:
        for label, url in brokers(names, stack):
            use_broker(url)
            yield label


def brokers(names, stack):
    """[(label, broker URL)] for ``names``: ``redis`` is REDIS_URL (the benchmark's own database),
    ``rabbitmq`` a private RabbitMQ node started here (tests/brokers.py, on TEST_PORT_BASE's ports)
    and stopped when ``stack`` (a contextlib.ExitStack) closes; a URL is taken as it is."""
    import tempfile

    found = []
    for name in names:
        if "://" in name:
            found.append((name.split("://", 1)[0], name))
        elif name == "redis":
            found.append(("redis", os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")))
        elif name == "rabbitmq":
            from tests.brokers import PrivateRabbit

            node = PrivateRabbit(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rabbitmq-")))
            stack.callback(node.stop)
            node.start()
            found.append(("rabbitmq", node.url))
        else:
            raise SystemExit(f"unknown broker {name!r}: redis, rabbitmq or a broker URL")
    return found


def use_broker(url):
    """Point this process (Django's settings and a fresh Celery app, made current) and the processes
    it starts (CELERY_BROKER_URL in the environment) at the broker ``url``."""
    from celery import Celery
    from django.conf import settings
    from kombu import pools

    from jobs.execution import publishing
    from scheduler_site import broker

    os.environ["CELERY_BROKER_URL"] = url
    settings.CELERY_BROKER_URL = url
    for name, value in broker.celery_settings(
            url, variable="CELERY_BROKER_URL", master_name=os.environ.get("CELERY_SENTINEL_MASTER_NAME", ""),
            visibility_timeout=settings.CELERY_VISIBILITY_TIMEOUT, max_timeout=settings.JOBS_MAX_TIMEOUT_SECONDS,
            kill_grace=settings.JOBS_KILL_GRACE_SECONDS).items():
        setattr(settings, name, value)
    publishing.forget()
    pools.reset()
    app = Celery("scheduler_site")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.set_current()
    app.set_default()
    return app


def drop_queues(url, queues):
    """Empty the benchmark's queues: FLUSHDB on Redis, the queues deleted on RabbitMQ."""
    from kombu import Connection

    with Connection(url) as connection:
        if connection.transport.driver_type == "redis":
            connection.default_channel.client.flushdb()
        else:
            for queue in queues:
                connection.default_channel.queue_delete(queue)


class Backlog:
    """Messages of a queue not acknowledged yet, asked on one connection: the queue's depth (a passive
    declare through kombu) and, on Redis, its ``unacked`` hash."""

    def __init__(self, queue):
        from django.conf import settings
        from kombu import Connection

        self.queue = queue
        # The service's transport options: on Redis a queue's depth sums the lists of its priority steps.
        self.connection = Connection(settings.CELERY_BROKER_URL,
                                     transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS)
        self.channel = self.connection.default_channel
        self.redis = self.connection.transport.driver_type == "redis"

    def waiting(self):
        try:
            return self.channel.queue_declare(queue=self.queue, passive=True).message_count
        except self.connection.channel_errors:  # Redis: an emptied queue's list is gone
            self.channel = self.connection.channel()
            return 0

    def left(self):
        return self.waiting() + (self.channel.client.hlen("unacked") if self.redis else 0)


class Arrivals(threading.Thread):
    """Takes every message off ``queue`` (no acknowledgements) and notes when it reached the broker:
    ``arrivals()`` gives (epoch, message headers) pairs once it is stopped.

    On Redis the queue's lists (one per priority step) are emptied by ``RPOP key 1000`` every
    millisecond or two, and a message's time is that of the pop that took it. A kombu consumer
    takes about 3,200 messages a second here (11,600 published in 0.7 s were taken in 3.6 s), so a
    burst's lag would be the consumer's, not the scheduler's. Other brokers: a kombu consumer."""

    def __init__(self, queue):
        super().__init__(daemon=True)
        self.queue = queue  # a kombu Queue, declared as the service declares it
        self.stop = threading.Event()
        self.taken = []  # (epoch, raw message) on Redis, (epoch, headers) otherwise

    def __len__(self):
        return len(self.taken)

    def run(self):
        from django.conf import settings
        from kombu import Connection

        with Connection(settings.CELERY_BROKER_URL, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as conn:
            if conn.transport.driver_type == "redis":
                self._pop_redis(conn.default_channel)
                return
            with conn.Consumer([self.queue], callbacks=[self._arrived], accept=["json"], no_ack=True):
                while not self.stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        conn.drain_events(timeout=0.5)

    def _arrived(self, body, message):
        self.taken.append((time.time(), {**message.headers, "_body": body}))

    def _pop_redis(self, channel):
        self.queue(channel).declare()
        lists = [channel._q_for_pri(self.queue.name, step) for step in channel.priority_steps]
        client = channel.client
        while not self.stop.is_set():
            pipe = client.pipeline(transaction=False)
            for name in lists:
                pipe.rpop(name, 1000)
            popped = [raw for batch in pipe.execute() if batch for raw in batch]
            now = time.time()
            self.taken.extend((now, raw) for raw in popped)
            if not popped:
                time.sleep(0.001)

    def arrivals(self):
        return [(t, json.loads(m)["headers"] if isinstance(m, bytes | str) else m) for t, m in self.taken]

    def run_arrivals(self):
        """(epoch, run id) of every run of every message taken: a bundle's (``jobs.execute_bundle``,
        its args the runs' (run id, attempt) pairs) each at its message's time."""
        import base64

        found = []
        for t, m in self.taken:
            if isinstance(m, bytes | str):
                raw = json.loads(m)
                headers, body = raw["headers"], raw["body"]
                if raw.get("properties", {}).get("body_encoding") == "base64":
                    body = base64.b64decode(body)
            else:
                headers, body = m, m.get("_body")
            task_id = headers.get("id") or ""
            if task_id.startswith("run-"):
                found.append((t, int(task_id.split("-")[1])))
            elif task_id.startswith("bundle-"):
                args = json.loads(body)[0] if isinstance(body, bytes | str) else body[0]
                found.extend((t, run_id) for run_id, _ in args[0])
        return found

