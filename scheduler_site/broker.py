"""The Celery broker, chosen by one variable: ``CELERY_BROKER_URL`` (``REDIS_URL`` when it is unset).

- ``redis://`` / ``rediss://``: one Redis;
- ``sentinel://host:port;sentinel://host:port;...``: a Redis watched by Sentinel, whose master is
  named by ``CELERY_SENTINEL_MASTER_NAME``; workers and the scheduler follow a failover;
- ``amqp://`` / ``amqps://``: RabbitMQ, the job queues declared as quorum queues (replicated and
  kept on disk), every message confirmed by the broker; or, with ``JOBS_RABBITMQ_PRIORITY_QUEUES``,
  classic durable queues with ``x-max-priority`` 9, which honour a job's priority (quorum queues
  of RabbitMQ 3.x order by arrival only) but live on one node.

``celery_settings`` turns the URL into the Celery settings that differ by broker, or stops the
process at start with a message naming the variable to fix.
"""

import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.retry import Retry

REDIS, SENTINEL, AMQP = "redis", "sentinel", "amqp"
SCHEMES = {"redis": REDIS, "rediss": REDIS, "sentinel": SENTINEL, "amqp": AMQP, "amqps": AMQP, "pyamqp": AMQP}


# The password of a URL, up to its last "@": what an error message must not show.
_PASSWORD = re.compile(r"(?P<user>(?:^|//)[^:@/;]*):(?!//)[^;]*@")


def redacted(url):
    """The URL with each password replaced by ***, for error messages (the URL may not even parse)."""
    return _PASSWORD.sub(r"\g<user>:***@", url)


def kind_of(url, variable="CELERY_BROKER_URL"):
    """REDIS, SENTINEL or AMQP for a broker URL; a clear error for anything else, naming the
    variable and never showing the URL's password."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        expected = ", ".join(f"{s}://" for s in SCHEMES if s != "pyamqp")
        raise ImproperlyConfigured(
            f"{variable} must be a broker URL starting with one of {expected}; got {redacted(url)!r}")
    for part in url.split(";") if SCHEMES[scheme] == SENTINEL else [url]:
        try:
            urlsplit(part.strip()).port  # noqa: B018 - reading it checks the port is a number in range
        except ValueError as exc:
            # urllib's message may quote the URL; the reason alone is kept.
            reason = str(exc).replace(part, redacted(part))
            raise ImproperlyConfigured(f"{variable} is not a valid URL ({reason}): {redacted(url)!r}") from None
    return SCHEMES[scheme]


def celery_settings(url, *, variable, master_name, visibility_timeout, max_timeout, kill_grace,
                    priority_queues=False):
    """The CELERY_* settings for this broker (timeouts in seconds)."""
    kind = kind_of(url, variable)
    options = {"socket_timeout": 10, "socket_connect_timeout": 5} if kind != AMQP else {}
    # The service keeps delays in the database, not in the broker: Celery's topology for delayed
    # messages on RabbitMQ is not used, and classic queues cost RabbitMQ least.
    queues = {"CELERY_TASK_DEFAULT_QUEUE_TYPE": "classic", "CELERY_TASK_CREATE_MISSING_QUEUE_TYPE": "classic",
              "CELERY_BROKER_NATIVE_DELAYED_DELIVERY_QUEUE_TYPE": "classic"}
    if kind in (REDIS, SENTINEL):
        if visibility_timeout <= max_timeout + kill_grace:
            # Redis delivers again a message still unacknowledged when the visibility timeout
            # expires, while its first delivery is still running.
            raise ImproperlyConfigured(
                f"CELERY_VISIBILITY_TIMEOUT ({visibility_timeout}s) must be longer than JOBS_MAX_TIMEOUT_SECONDS "
                f"({max_timeout}s) plus the kill grace"
            )
        # One list per priority (a job's 0-9, jobs.execution.publishing.broker_priority), popped most urgent first.
        options.update(visibility_timeout=visibility_timeout, health_check_interval=10, retry_on_timeout=True,
                       priority_steps=list(range(10)))
    if kind == SENTINEL:
        if not master_name:
            raise ImproperlyConfigured(
                f"{variable} is a Sentinel URL ({redacted(url)!r}): set CELERY_SENTINEL_MASTER_NAME to the name of the "
                "master the sentinels watch"
            )
        # A sentinel that does not answer is skipped for the next one at once: redis-py's default
        # retries with backoff made a call wait ~45 s when every sentinel was down.
        options.update(master_name=master_name, sentinel_kwargs={
            "socket_timeout": 2, "socket_connect_timeout": 1, "retry": Retry(NoBackoff(), 0)})
    if kind == AMQP:
        # Every publish waits for the broker's confirm (the scheduler's batches collect theirs once
        # per batch); job queues are quorum queues, which RabbitMQ keeps on disk and replicates.
        options["confirm_publish"] = True
        if priority_queues:
            # Classic queues that sort by priority (a job's 0-9 is the AMQP priority); a message
            # sent with none (a notification) goes first, as it does on Redis.
            queues.update(CELERY_TASK_QUEUE_MAX_PRIORITY=9, CELERY_TASK_DEFAULT_PRIORITY=9)
        else:
            queues.update(CELERY_TASK_DEFAULT_QUEUE_TYPE="quorum", CELERY_TASK_CREATE_MISSING_QUEUE_TYPE="quorum")
    return {"CELERY_BROKER_TRANSPORT_OPTIONS": options, **queues}
