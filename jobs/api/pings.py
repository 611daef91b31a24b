"""The ping endpoints of check-in jobs, shaped like healthchecks.io's so a crontab line that pings one
(``curl -fsS -m 10 --retry 5 <url>``) works unchanged: ``/ping/<uuid>`` (a success), ``/start``,
``/fail`` and ``/<exit status>`` (0 to 255), by GET, POST or HEAD alike. The slug form
``/ping/<team ping key>/<job name>`` (healthchecks' ``/ping/<ping_key>/<slug>``) takes the same
suffixes: the job of that name among the jobs of the team whose ping key it is (``TeamPingKey``).

No login: the uuid is the secret (``Job.ping_key``), or the team's key. Answers 200 ``OK``; 404 for a
uuid no check-in job has (a key no team has, a name no check-in job of that team has); 400 for an exit
status out of range; 429 past the rate per ping URL or per client address
(JOBS_PING_RATE_PER_URL, JOBS_PING_RATE_PER_ADDRESS, counted per minute in the ``pings`` cache, Redis).
The body is the run's output, cut to JOBS_PING_BODY_BYTES (never refused for its size).
"""

import hashlib
import time

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt

from audit import trail

from .. import kinds, lifecycle
from ..models import Job

METHODS = ("GET", "POST", "HEAD")
WINDOW_SECONDS = 60
ACTIONS = {"": lifecycle.pings.SUCCESS, "start": lifecycle.pings.START, "fail": lifecycle.pings.FAIL}


def _answer(text, status=200):
    return HttpResponse(f"{text}\n" if status != 200 else "OK", status=status, content_type="text/plain")


@csrf_exempt
def ping(request, key, action="", slug=None):
    if request.method not in METHODS:
        response = _answer("Use GET, POST or HEAD.", 405)
        response["Allow"] = ", ".join(METHODS)
        return response
    exit_status = None
    if action.isdigit():
        exit_status = int(action) if len(action) <= 3 else 256
        if exit_status > 255:
            return _answer("An exit status is a number from 0 to 255.", 400)
        kind = lifecycle.pings.SUCCESS if exit_status == 0 else lifecycle.pings.FAIL
    elif action in ACTIONS:
        kind = ACTIONS[action]
    else:
        return _answer("Not found: a ping is /ping/<uuid>, /start, /fail or /<exit status 0-255>.", 404)
    address = trail.client_address(request)
    if _over_rate(key if slug is None else f"{key}/{_digest(slug)}", address):
        response = _answer("Too many pings: slow down.", 429)
        response["Retry-After"] = str(WINDOW_SECONDS - int(time.time()) % WINDOW_SECONDS)
        return response
    pinged = {"ping_key": key} if slug is None else {"name": slug, "group__ping_key__key": key}
    job = Job.objects.filter(**pinged, kind__in=kinds.running_elsewhere()).first()
    if job is None:
        return _answer("Not found: no check-in job has this ping URL.", 404)
    output, size = _body(request)
    lifecycle.record_ping(job, lifecycle.Ping(kind, exit_status, output, size, address))
    return _answer("OK")


def _digest(slug):
    """A job's name as a cache key may hold it (a name may be long, with spaces)."""
    return hashlib.sha256(slug.encode()).hexdigest()[:32]


def _body(request):
    """(the body as text, cut to the cap; its size in bytes as sent)."""
    cap = settings.JOBS_PING_BODY_BYTES
    kept = request.read(cap) if cap else b""
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    size = max(size, len(kept))
    # PostgreSQL's text holds no NUL; a character cut in two at the cap is dropped.
    return kept.decode("utf-8", errors="ignore" if size > cap else "replace").replace("\x00", ""), size


def _over_rate(key, address):
    """Whether this ping is over the rate of its ping URL or of its client's address: one round trip
    to Redis for both counts (INCR and EXPIRE in a pipeline); another cache counts with add and incr."""
    window = int(time.time() // WINDOW_SECONDS)
    limits = [(f"url:{key}:{window}", settings.JOBS_PING_RATE_PER_URL),
              (f"address:{address}:{window}", settings.JOBS_PING_RATE_PER_ADDRESS)]
    limits = [(name, limit) for name, limit in limits if limit]
    if not limits:
        return False
    cache = caches["pings"]
    if isinstance(cache, RedisCache):
        pipe = cache._cache.get_client(write=True).pipeline(transaction=False)
        for name, _ in limits:
            pipe.incr(cache.make_and_validate_key(name))
            pipe.expire(cache.make_and_validate_key(name), WINDOW_SECONDS * 2)
        counts = pipe.execute()[::2]
    else:
        counts = [_count(cache, name) for name, _ in limits]
    return any(count > limit for count, (_, limit) in zip(counts, limits, strict=True))


def _count(cache, name):
    cache.add(name, 0, timeout=WINDOW_SECONDS * 2)
    try:
        return cache.incr(name)
    except ValueError:  # expired between the two calls: the window is new
        return 0
