"""Leadership among scheduler nodes: a lease in the database (jobs/coordination/leases.py), renewed by its holder.

The lease lives in PostgreSQL, the system of record, not in the broker: the scheduler keeps its
leader while the broker fails over or restarts. Its times are the database's. A node that was
paused past the lease finds, when it wakes, that its renewal fails (another node raised the epoch)
and steps down; a tick it was in the middle of cannot commit, because the dispatch transaction
fences on the epoch (``dispatch.dispatch_due``). The one-run-per-slot constraint stays the last fence.
"""

import contextlib
import logging
import os
import socket

from django.conf import settings
from django.db import Error as DatabaseError  # any of them: a broken connection raises InterfaceError

from ..coordination import leases

logger = logging.getLogger(__name__)


def node_name():
    return settings.JOBS_NODE_NAME or f"{socket.gethostname()}:{os.getpid()}"


class Leadership:
    def __init__(self, key=None, ttl=None, name=None):
        self.key = key or settings.JOBS_LEADER_KEY
        self.ttl = ttl or settings.JOBS_LEADER_TTL_SECONDS
        self.name = name or node_name()
        self.held = None  # leases.Held while this node leads

    @property
    def is_leader(self):
        return self.held is not None

    def refresh(self):
        """Renew the lease, or take it when it is free; returns whether this node leads now."""
        try:
            if self.held and not leases.renew(self.held, self.ttl):
                logger.warning("scheduler %s lost the leadership: epoch %s was taken over", self.name,
                               self.held.epoch)
                self.held = None
            if self.held is None:
                self.held = leases.take(self.key, self.name, self.ttl)
                if self.held:
                    logger.info("scheduler %s is now the leader (epoch %s)", self.name, self.held.epoch)
        except DatabaseError as exc:
            if self.held:
                logger.warning("scheduler %s lost the leadership: %s", self.name, exc)
            self.held = None
        return self.is_leader

    def note_tick(self):
        if self.held:
            leases.note_tick(self.held)

    def release(self):
        if self.held is None:
            return
        with contextlib.suppress(DatabaseError):  # it expires by itself
            leases.release(self.held)
        self.held = None


def current_leader():
    """{'node', 'since' (a datetime)} of the leading scheduler, or None when no scheduler leads."""
    found = leases.state(settings.JOBS_LEADER_KEY)
    if found is None or found["holder"] is None:
        return None
    return {"node": found["holder"], "since": found["since"]}

