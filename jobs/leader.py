"""Leadership among scheduler nodes: a Redis lock with a short TTL, renewed by its owner only.

redis-py's ``Lock`` stores a random token and renews or releases only when the stored token is
still ours (a Lua compare-and-set), so a node that was paused past the TTL cannot renew a lock
another node took in the meantime (the RedBeat bug, redbeat#127). Leadership is only a hint
for efficiency: the one-run-per-slot constraint is the fence that makes a stale leader harmless.
"""

import json
import logging
import os
import socket
import time

import redis
from django.conf import settings
from redis.exceptions import LockError, RedisError

logger = logging.getLogger(__name__)


def node_name():
    return settings.JOBS_NODE_NAME or f"{socket.gethostname()}:{os.getpid()}"


def redis_client():
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)


class Leadership:
    def __init__(self, client=None, key=None, ttl=None, name=None):
        self.client = client or redis_client()
        self.key = key or settings.JOBS_LEADER_KEY
        self.ttl = ttl or settings.JOBS_LEADER_TTL_SECONDS
        self.name = name or node_name()
        self.lock = self.client.lock(self.key, timeout=self.ttl, blocking=False, thread_local=False)
        self.is_leader = False
        self.since = None

    def refresh(self):
        """Take or keep the lock; returns whether this node leads now."""
        try:
            if self.is_leader:
                self.lock.reacquire()
            elif self.lock.acquire(blocking=False):
                self.is_leader, self.since = True, time.time()
                logger.info("scheduler %s is now the leader", self.name)
            if self.is_leader:
                info = json.dumps({"node": self.name, "since": self.since})
                self.client.set(f"{self.key}:info", info, px=int(self.ttl * 1000))
        except (LockError, RedisError) as exc:
            if self.is_leader:
                logger.warning("scheduler %s lost the leadership: %s", self.name, exc)
            self.is_leader, self.since = False, None
            self.lock.local.token = None
        return self.is_leader

    def release(self):
        if not self.is_leader:
            return
        try:
            self.lock.release()
            self.client.delete(f"{self.key}:info")
        except (LockError, RedisError):
            pass
        self.is_leader = False


def current_leader(client=None):
    """{'node': ..., 'since': epoch seconds} of the leading scheduler, or None."""
    client = client or redis_client()
    raw = client.get(f"{settings.JOBS_LEADER_KEY}:info")
    return json.loads(raw) if raw else None
