"""The ping endpoints of check-in jobs, shaped like healthchecks.io's so a crontab line that pings one
(``curl -fsS -m 10 --retry 5 <url>``) works unchanged: ``/ping/<uuid>`` (a success), ``/start``,
``/fail`` and ``/<exit status>`` (0 to 255), by GET, POST or HEAD alike. The slug form
``/ping/<team ping key>/<job name>`` (healthchecks' ``/ping/<ping_key>/<slug>``) takes the same
suffixes: the job of that name among the jobs of the team whose ping key it is (``TeamPingKey``).

No login: the uuid is the secret (``Job.ping_key``), or the team's key. Answers 200 ``OK``; 404 for a
uuid no check-in job has (a key no team has, a name no check-in job of that team has); 400 for an exit
status out of range; 429 past the rate per ping URL or per client address
(JOBS_PING_RATE_PER_URL, JOBS_PING_RATE_PER_ADDRESS, counted per minute in the ``pings`` cache, Redis);
503 while the queue is full or out of reach (curl's ``--retry`` tries again).
The body is the run's output, cut to JOBS_PING_BODY_BYTES (never refused for its size).

A ping is answered once it is queued (jobs.lifecycle.ping_queue): the scheduler leader records it
within about a second. ``lane`` answers pings in front of Django (scheduler_site.wsgi): one prepared,
indexed SELECT and one Redis call a ping. The ``ping`` view answers them the same way where a project mounts
the service's URLs in its own WSGI application.
"""

import hashlib
import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.db import DatabaseError, close_old_connections
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from redis.exceptions import RedisError

from audit import trail

from .. import kinds, lifecycle
from ..lifecycle import ping_queue

METHODS = ("GET", "POST", "HEAD")
WINDOW_SECONDS = 60
RETRY_SECONDS = 10  # after a 503
ACTIONS = {"": lifecycle.pings.SUCCESS, "start": lifecycle.pings.START, "fail": lifecycle.pings.FAIL}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PREFIX = "/ping/"


@dataclass(frozen=True)
class Answer:
    status: int
    text: str = "OK"
    headers: tuple = ()

    @property
    def body(self):
        return (self.text if self.status == 200 else f"{self.text}\n").encode()


NOT_FOUND = Answer(404, "Not found: a ping is /ping/<uuid>, /start, /fail or /<exit status 0-255>.")


def take(method, key, action, slug, body, size, address):
    """Answer one ping: ``key`` and ``action`` (and ``slug`` in the slug form) from its URL, ``body``
    its first bytes up to the cap, ``size`` its length as sent, ``address`` the client's."""
    if method not in METHODS:
        return Answer(405, "Use GET, POST or HEAD.", (("Allow", ", ".join(METHODS)),))
    exit_status = None
    if action.isdigit():
        exit_status = int(action) if len(action) <= 3 else 256
        if exit_status > 255:
            return Answer(400, "An exit status is a number from 0 to 255.")
        kind = lifecycle.pings.SUCCESS if exit_status == 0 else lifecycle.pings.FAIL
    elif action in ACTIONS:
        kind = ACTIONS[action]
    else:
        return NOT_FOUND
    counters = _counters(key if slug is None else f"{key}/{_digest(slug)}", address)
    try:
        queue = ping_queue.current()
        job_id = lifecycle.pinged_job(kinds.running_elsewhere(), key, slug)
        ping = lifecycle.Ping(kind, exit_status, *_decoded(body, size), address)
        if job_id is not None and queue is not None:
            pushed = queue.push(job_id, ping, counters, WINDOW_SECONDS * 2, settings.JOBS_PING_QUEUE_MAX)
            over, full = pushed == ping_queue.OVER_RATE, pushed == ping_queue.QUEUE_FULL
        else:
            over, full = _over_rate(queue, counters), False
        if over:
            return Answer(429, "Too many pings: slow down.",
                          (("Retry-After", str(WINDOW_SECONDS - int(time.time()) % WINDOW_SECONDS)),))
        if job_id is None:
            return Answer(404, "Not found: no check-in job has this ping URL.")
        if full:
            return Answer(503, "Too many pings waiting to be recorded: try again.",
                          (("Retry-After", str(RETRY_SECONDS)),))
        if queue is None:
            lifecycle.record_ping(job_id, ping)
    except (RedisError, DatabaseError):
        return Answer(503, "Pings cannot be taken just now: try again.", (("Retry-After", str(RETRY_SECONDS)),))
    return Answer(200)


@csrf_exempt
def ping(request, key, action="", slug=None):
    """The pings where the service's URLs are mounted in a project's own WSGI application."""
    cap = settings.JOBS_PING_BODY_BYTES
    answer = take(request.method, str(key), action, slug, request.read(cap) if cap else b"",
                  _size(request.META), trail.client_address(request))
    response = HttpResponse(answer.body, status=answer.status, content_type="text/plain")
    for name, value in answer.headers:
        response[name] = value
    return response


def lane(application):
    """``application`` (a WSGI application) with the pings answered in front of it."""

    def pings_first(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if not path.startswith(PREFIX):
            return application(environ, start_response)
        answer = _lane_answer(environ, path)
        start_response(f"{answer.status} {_reason(answer.status)}",
                       [("Content-Type", "text/plain"), ("Content-Length", str(len(answer.body))),
                        ("X-Content-Type-Options", "nosniff"), *answer.headers])
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [answer.body]

    return pings_first


def _lane_answer(environ, path):
    routed = _route(path[len(PREFIX):].encode("latin-1").decode("utf-8", "replace"))
    if routed is None:
        return NOT_FOUND
    cap = settings.JOBS_PING_BODY_BYTES
    body = environ["wsgi.input"].read(cap) if cap else b""
    try:
        return take(environ.get("REQUEST_METHOD", "GET"), *routed, body, _size(environ),
                    trail.client_address_of(environ))
    finally:
        _request_finished()


def _request_finished():
    """What Django does at a request's end: a connection broken, or older than CONN_MAX_AGE, is closed."""
    close_old_connections()


def _route(rest):
    """(key, action, slug) of a ping URL's path after /ping/, or None: as scheduler_site.urls routes them."""
    parts = rest.split("/")
    if UUID.fullmatch(parts[0]):
        return (parts[0], parts[1] if len(parts) == 2 else "", None) if len(parts) <= 2 else None
    if len(parts) in (2, 3) and parts[0] and parts[1]:
        return parts[0], parts[2] if len(parts) == 3 else "", parts[1]
    return None


def _reason(status):
    return {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
            503: "Service Unavailable"}[status]


def _size(meta):
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _decoded(kept, size):
    """(the body as text, cut to the cap; its size in bytes as sent)."""
    size = max(size, len(kept))
    # PostgreSQL's text holds no NUL; a character cut in two at the cap is dropped.
    text = kept.decode("utf-8", errors="ignore" if size > settings.JOBS_PING_BODY_BYTES else "replace")
    return text.replace("\x00", ""), size


def _digest(slug):
    """A job's name as a cache key may hold it (a name may be long, with spaces)."""
    return hashlib.sha256(slug.encode()).hexdigest()[:32]


def _counters(key, address):
    window = int(time.time() // WINDOW_SECONDS)
    limits = [(f"url:{key}:{window}", settings.JOBS_PING_RATE_PER_URL),
              (f"address:{address}:{window}", settings.JOBS_PING_RATE_PER_ADDRESS)]
    return [(name, limit) for name, limit in limits if limit]


def _over_rate(queue, counters):
    """Whether a ping is over one of ``counters``: one round trip to the queue's Redis for them all;
    another cache counts with add and incr."""
    if not counters:
        return False
    if queue is not None:
        return queue.count(counters, WINDOW_SECONDS * 2)
    cache = caches["pings"]
    return any(_count(cache, name) > limit for name, limit in counters)


def _count(cache, name):
    cache.add(name, 0, timeout=WINDOW_SECONDS * 2)
    try:
        return cache.incr(name)
    except ValueError:  # expired between the two calls: the window is new
        return 0
