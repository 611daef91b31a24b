"""A work-around for a crash of the Celery worker when its Redis connection breaks (Celery 5.7.0,
kombu 5.7.0).

On a broken broker connection, Celery's consumer first collects the connection (which forgets its
``client``) and then closes it. Closing the channel restores the worker's unacknowledged messages,
and acknowledging a finished task removes it from the unacked index, both through that connection:
``AttributeError: 'NoneType' object has no attribute 'hostname'``, an "Unrecoverable error" that
ends the worker, which then consumes nothing (PITFALLS §3; ``tests/chaos/test_service_faults.py``
kills Redis while a task runs to reproduce it).

Skipping those two steps once the connection is gone loses nothing the service relies on: the
database decides what runs. A queued run whose message the broker no longer holds is published
again by the monitor, and a message left in a Redis that survived comes back after the visibility
timeout, when the claim drops it as a duplicate.

The patch is written against kombu 5.7.0 and applied to that version only. With any other kombu
the process says so at start and runs kombu as it is: chaos test 7b (the broker dies under a
running task) then tells whether the crash is fixed, so that this module can go, or the patch
must be checked against the new version and its pin moved.
"""

import functools
import logging
import sys

import kombu
from kombu.transport import redis as kombu_redis

logger = logging.getLogger(__name__)

PINNED = "5.7.0"


def _connection_gone(qos):
    transport = getattr(qos.channel, "connection", None)
    return transport is None or getattr(transport, "client", None) is None


def install(version=kombu.__version__):
    """Apply the patch to kombu ``PINNED``; with another version, say so (on stderr, as logging is
    not set up yet when Celery's app is imported) and leave kombu alone. Returns whether it applied."""
    if version != PINNED:
        print(f"scheduler_site.kombu_patches: written for kombu {PINNED}, found kombu {version}: not applied; "
              "run chaos test 7b (tests/chaos, 'dies under a running task') to see whether it is still needed",
              file=sys.stderr)
        return False
    qos = kombu_redis.QoS
    if getattr(qos.restore_unacked, "skips_when_disconnected", False):
        return True
    restore_unacked, ack = qos.restore_unacked, qos.ack

    @functools.wraps(restore_unacked)
    def restore_unacked_if_connected(self, client=None):
        if client is None and _connection_gone(self):
            logger.warning("broker connection gone: %s unacknowledged message(s) left to the database's "
                           "republishing", len(self._delivered))
            self._delivered.clear()
            return None
        return restore_unacked(self, client)

    @functools.wraps(ack)
    def ack_if_connected(self, delivery_tag):
        if _connection_gone(self):
            logger.warning("broker connection gone: not acknowledging %s", delivery_tag)
            return None
        return ack(self, delivery_tag)

    restore_unacked_if_connected.skips_when_disconnected = True
    qos.restore_unacked, qos.ack = restore_unacked_if_connected, ack_if_connected
    return True
