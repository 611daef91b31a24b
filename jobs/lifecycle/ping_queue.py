"""Check-in pings queued in Redis by the web (jobs.api.pings) and recorded in batches by the scheduler
leader, so that a ping is answered without a write to the database.

``push`` counts the ping against its rate limits, numbers it and puts it in the queue with the Redis
server's time, in one call (a Lua script); ``record`` takes the oldest first, a batch a transaction,
each ping recorded at the time it reached Redis (on the database's clock), and writes the number of
the last one recorded (``PingQueueMark``) in that transaction before it takes them off the queue: a
leader that dies in between records none of them twice, and two leaders at once record each once.

Without Redis (the ``pings`` cache elsewhere) there is no queue: the web records each ping in its
request (``current()`` is None). The queue lives as long as Redis keeps its data.
"""

import functools
import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import transaction
from redis.exceptions import RedisError

from ..models import PingQueueMark
from ..timing import clock
from . import ping_batches
from .pings import Ping, record_ping

logger = logging.getLogger(__name__)

BATCH = 500  # pings recorded in one transaction
BUDGET_SECONDS = 0.2  # of one drain: the leader's tick goes on to dispatch
OFFSET_SECONDS = 60  # between readings of the database's clock against Redis's
RETRY_SECONDS = 10  # between tries of a queue out of reach: the leader's ticks are not spent on it
MARK = "pings"
OVER_RATE, QUEUE_FULL = -1, -2
NOTHING_KNOWN = datetime(1970, 1, 1, tzinfo=UTC)

# KEYS: the queue, its numbering, the rate counters; ARGV: the ping, the counters' lifetime, the
# queue's cap, then each counter's limit. Returns the ping's number, OVER_RATE or QUEUE_FULL.
PUSH = """
local over = false
for i = 3, #KEYS do
    local count = redis.call('INCR', KEYS[i])
    if count == 1 then redis.call('EXPIRE', KEYS[i], ARGV[2]) end
    if count > tonumber(ARGV[i + 1]) then over = true end
end
if over then return -1 end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -2 end
local number = redis.call('INCR', KEYS[2])
local now = redis.call('TIME')
redis.call('LPUSH', KEYS[1], number .. ' ' .. now[1] .. '.' .. string.format('%06d', tonumber(now[2])) .. ' ' .. ARGV[1])
return number
"""

# Takes off the queue's tail (its oldest) the pings numbered up to ARGV[1]: those recorded.
TRIM = """
local taken = 0
while true do
    local oldest = redis.call('LINDEX', KEYS[1], -1)
    if not oldest or tonumber(string.match(oldest, '^(%d+)')) > tonumber(ARGV[1]) then return taken end
    redis.call('RPOP', KEYS[1])
    taken = taken + 1
end
"""


@dataclass(frozen=True)
class Queued:
    number: int
    at: float  # the Redis server's time, in seconds since the epoch
    job_id: int
    ping: Ping


class Queue:
    """The queue in the Redis of the ``pings`` cache: one a process (a client made for each call was
    a sixth of a ping's time)."""

    def __init__(self, cache):
        self.cache, self.client = cache, cache._cache.get_client(write=True)
        self.key, self.numbering, self.epoch_key = (cache.make_key(name) for name in ("queue", "numbering", "epoch"))
        # Run by their hash (loaded on first use), not sent with each call.
        self.push_script, self.trim_script = self.client.register_script(PUSH), self.client.register_script(TRIM)
        self.out_since = self.retry_at = 0.0  # an outage of its Redis, as the leader's drains met it (monotonic)
        self.offset = self.offset_read_at = 0.0

    def push(self, job_id, ping, counters, lifetime, cap):
        """Count ``counters`` ((cache key, limit) pairs), then queue ``ping`` of the job unless one is
        over its limit or the queue holds ``cap`` pings: the ping's number, OVER_RATE or QUEUE_FULL."""
        body = json.dumps([job_id, ping.kind, ping.exit_status, ping.output, ping.output_bytes, ping.address],
                          separators=(",", ":"))
        keys = [self.key, self.numbering, *(self.cache.make_key(name) for name, _ in counters)]
        return self.push_script(keys, [body, lifetime, cap, *(limit for _, limit in counters)])

    def count(self, counters, lifetime):
        """Count ``counters`` without queueing anything (a ping refused before it is queued still
        counts): whether one is over its limit."""
        pipe = self.client.pipeline(transaction=False)
        for name, _ in counters:
            pipe.incr(self.cache.make_key(name))
            pipe.expire(self.cache.make_key(name), lifetime)
        counts = pipe.execute()[::2]
        return any(found > limit for found, (_, limit) in zip(counts, counters, strict=True))

    def epoch(self):
        """The queue's numbering: made anew when Redis has none (it lost the queue, or never had one)."""
        self.client.set(self.epoch_key, uuid.uuid4().hex, nx=True)
        return self.client.get(self.epoch_key).decode()

    def to_database(self, redis_now):
        """Seconds from Redis's clock to the database's (the runs' clock), read again once a minute:
        an idle leader's drain is one round trip to Redis, none to the database."""
        if redis_now >= self.offset_read_at + OFFSET_SECONDS:
            self.offset = (clock.now() - _moment(redis_now)).total_seconds()
            self.offset_read_at = redis_now
        return self.offset

    def waiting(self):
        return self.client.llen(self.key)


def current():
    """The queue, or None where pings are recorded in their requests (the ``pings`` cache is not Redis)."""
    cache = caches["pings"]
    return _queue_of(cache) if isinstance(cache, RedisCache) else None


@functools.lru_cache(maxsize=8)
def _queue_of(cache):
    return Queue(cache)


def _parse(raw):
    number, at, body = raw.decode().split(" ", 2)
    job_id, kind, exit_status, output, output_bytes, address = json.loads(body)
    return Queued(int(number), float(at), job_id, Ping(kind, exit_status, output, output_bytes, address))


@dataclass(frozen=True)
class Drained:
    recorded: int
    until: datetime | None  # every ping that reached the queue before it is recorded (None: no queue)
    waiting: bool  # pings are left for the next drain


def record(budget_seconds=BUDGET_SECONDS, batch=BATCH):
    """Record the queued pings, oldest first, for up to ``budget_seconds`` (Drained). With the queue
    out of reach nothing is known to be recorded (``until`` is the start of time): the scheduler's
    other work goes on."""
    queue = current()
    if queue is None:
        return Drained(0, None, False)
    if time.monotonic() < queue.retry_at:
        return Drained(0, NOTHING_KNOWN, False)
    try:
        drained = _drain(queue, budget_seconds, batch)
    except RedisError as exc:
        if not queue.out_since:  # said once an outage, not every tick
            logger.warning("the queue of pings is out of reach (tried again every %s s): %s", RETRY_SECONDS, exc)
            queue.out_since = time.monotonic()
        queue.retry_at = time.monotonic() + RETRY_SECONDS
        return Drained(0, NOTHING_KNOWN, False)
    if queue.out_since:
        logger.info("the queue of pings is reachable again after %.0f s", time.monotonic() - queue.out_since)
        queue.out_since = 0.0
    return drained


def _drain(queue, budget_seconds, batch):
    client = queue.client
    deadline = time.monotonic() + budget_seconds
    recorded, epoch = 0, None
    while True:
        pipe = client.pipeline(transaction=False)
        (seconds, micros), raw = pipe.time().lrange(queue.key, -batch, -1).execute()
        redis_now = seconds + micros / 1e6
        to_database = queue.to_database(redis_now)
        if raw:
            epoch = epoch or queue.epoch()
            entries = [_parse(item) for item in reversed(raw)]
            recorded += _record_batch(entries, epoch, to_database)
            queue.trim_script([queue.key], [entries[-1].number])
        if len(raw) < batch:
            return Drained(recorded, _moment(redis_now + to_database), False)
        if time.monotonic() >= deadline:
            left = client.lindex(queue.key, -1)
            oldest = min(_parse(left).at, redis_now) if left else redis_now
            return Drained(recorded, _moment(oldest + to_database), left is not None)


def _moment(seconds):
    return datetime.fromtimestamp(seconds, UTC)


def _record_batch(entries, epoch, to_database):
    with transaction.atomic():
        mark, _ = PingQueueMark.objects.select_for_update().get_or_create(name=MARK)
        done = mark.recorded if mark.epoch == epoch else 0
        fresh = [(entry.job_id, entry.ping, _moment(entry.at + to_database)) for entry in entries if entry.number > done]
        try:
            with transaction.atomic():
                ping_batches.record_many(fresh)
        except Exception:  # one ping that cannot be recorded must not hold back the queue behind it
            logger.exception("a batch of %s pings could not be recorded together; one at a time", len(fresh))
            for job_id, ping, at in fresh:
                try:
                    record_ping(job_id, ping, now=at)
                except Exception:
                    logger.exception("a ping of job %s could not be recorded; dropped", job_id)
        mark.epoch, mark.recorded = epoch, max(done, entries[-1].number)
        mark.save(update_fields=["epoch", "recorded"])
    return len(fresh)
