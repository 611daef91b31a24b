"""One heartbeat thread per worker process, beating for every attempt the process holds.

A thread (and a database connection) per run cost more than a no-op run itself; this thread and
its connection live as long as the process. Every ``JOBS_HEARTBEAT_SECONDS`` it refreshes the
heartbeat of each attempt held, so an attempt is beaten at most that long after its claim (which
writes the first heartbeat). When a beat finds the run no longer this attempt's (cancelled, or
declared lost by the monitor) it sets the attempt's ``stopped`` event so the executor can stop.
"""

import contextlib
import logging
import os
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection

from . import runs

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_held = {}  # (run_id, attempt) -> threading.Event set when the run was taken from the attempt
_thread = None
_pid = None


def hold(run_id, attempt):
    """Start beating for this attempt; returns its ``stopped`` event."""
    stopped = threading.Event()
    with _lock:
        _held[(run_id, attempt)] = stopped
        _ensure_thread()
    return stopped


def release(run_id, attempt):
    with _lock:
        _held.pop((run_id, attempt), None)


@contextlib.contextmanager
def held(run_id, attempt):
    """Beat for this attempt inside the block, which gets its ``stopped`` event."""
    stopped = hold(run_id, attempt)
    try:
        yield stopped
    finally:
        release(run_id, attempt)


def _ensure_thread():
    global _thread, _pid
    # A forked pool process inherits the module state but not the thread.
    if _thread is None or _pid != os.getpid() or not _thread.is_alive():
        _pid = os.getpid()
        _thread = threading.Thread(target=_beat_forever, daemon=True, name="heartbeats")
        _thread.start()


def _beat_forever():
    while True:
        time.sleep(settings.JOBS_HEARTBEAT_SECONDS)
        with _lock:
            held = list(_held.items())
        if not held:
            connection.close()  # nothing to beat for: give the connection back until there is
            continue
        # Drop a connection the database closed (a restart) or one past CONN_MAX_AGE.
        close_old_connections()
        for (run_id, attempt), stopped in held:
            try:
                if not runs.heartbeat(run_id, attempt):
                    stopped.set()
                    release(run_id, attempt)
            except Exception:
                logger.warning("heartbeat of run %s failed; retrying", run_id, exc_info=True)
                close_old_connections()
