"""One heartbeat thread per worker process, beating for every attempt the process holds.

A thread (and a database connection) per run cost more than a no-op run itself; this thread and
its connection live as long as the process. Every ``JOBS_HEARTBEAT_SECONDS`` it refreshes the
heartbeat of each attempt held, so an attempt is beaten at most that long after its claim (which
writes the first heartbeat). When a beat finds the run no longer this attempt's (cancelled, or
declared lost by the monitor) it sets the attempt's ``stopped`` event so the executor can stop.

The runs a bundle claimed (jobs.worker.bundle) are held *quietly* while they wait their turn, and
again once done until their success is recorded: all of them beaten in one statement
(``lifecycle.heartbeat_many``), with no output to save.

The same beat saves the tail of what the attempt printed since the last one (the run page, the API
and ``manage.py runs tail`` show it while the run goes on): one write per heartbeat at most, and
none for an attempt that printed nothing new, so a quiet or short run costs nothing more.

**Self-fencing.** A worker whose host is cut off cannot heartbeat, and the leader declares its
attempts lost after ``JOBS_LOST_AFTER_HEARTBEATS`` silent intervals and runs them elsewhere. So when
no beat has gone through for ``JOBS_FENCE_AFTER_SECONDS`` (less than that window) and the broker is
out of reach as well, the worker stops its attempts itself: their ``stopped`` events are set with
the reason (a command's process group is killed; a function that does not stop within
``JOBS_KILL_GRACE_SECONDS`` ends with its pool process). A database restart alone, with the broker
reachable, fences nothing: the leader cannot declare anything lost while it has no database either.
A separate watch thread decides, since a beat to an unreachable database may block. A beat that
finds its attempt declared lost (the process was frozen or starved past the lost window, its host
reachable all along) stops it the same way.
"""

import contextlib
import logging
import os
import threading
import time

from celery import current_app
from django.conf import settings
from django.db import close_old_connections, connection

from .. import lifecycle

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_held = {}  # (run_id, attempt) -> _Held
_thread = None
_pid = None
_last_beat = time.monotonic()  # when every attempt held was last beaten (or none was held)


class _Held:
    def __init__(self, output, worker=None):
        self.worker = worker  # the worker's name, to take back a claim the database lost
        self.stopped = threading.Event()  # set when the run was taken from the attempt
        self.output = output  # the attempt's OutputTail, or None
        self.saved_bytes = 0  # output.total when its tail was last saved
        self.fenced = ""  # why the worker stopped the attempt itself, when it did
        self.done = False  # the attempt's task has left its block
        self.quiet = False  # a bundle's run not running now: beaten with the others, in one statement


def hold(run_id, attempt, output=None):
    """Start beating for this attempt (saving ``output``, an OutputTail, as it grows); returns the
    attempt's ``stopped`` event."""
    return _hold(run_id, attempt, output).stopped


def _hold(run_id, attempt, output, worker=None):
    global _last_beat
    held = _Held(output, worker)
    with _lock:
        if not _held:
            _last_beat = time.monotonic()  # an idle spell is no silence
        _held[(run_id, attempt)] = held
        _ensure_thread()
    return held


def release(run_id, attempt):
    with _lock:
        _held.pop((run_id, attempt), None)


def hold_quiet(runs):
    """Beat for these claimed runs ((run id, attempt) pairs) of a bundle that are not running now
    (waiting their turn, or done with their success not yet recorded); {pair: entry}, each entry's
    ``stopped`` set when its run is no longer the attempt's (cancelled, declared lost) or fenced."""
    global _last_beat
    entries = {}
    with _lock:
        if not _held:
            _last_beat = time.monotonic()
        for key in runs:
            entry = entries[key] = _Held(None)
            entry.quiet = entry.done = True  # nothing of it runs: nothing for a fence to wait for
            _held[key] = entry
        _ensure_thread()
    return entries


def release_quiet(key, entry):
    """Stop beating for a quiet run, unless it has started (and holds an entry of its own) meanwhile."""
    with _lock:
        if _held.get(key) is entry:
            del _held[key]


@contextlib.contextmanager
def held(run_id, attempt, output=None, worker=None):
    """Beat for this attempt inside the block, which gets its entry: ``stopped`` (an event the
    executor watches) and ``fenced`` (why the worker stopped the attempt itself, if it did).
    With ``worker`` (this worker's name), a beat that finds the attempt's claim lost in a database
    crash takes it back (``lifecycle.restore_claim``) instead of stopping the attempt."""
    entry = _hold(run_id, attempt, output, worker)
    try:
        yield entry
    finally:
        entry.done = True
        release(run_id, attempt)


def _ensure_thread():
    global _thread, _pid
    # A forked pool process inherits the module state but not the thread.
    if _thread is None or _pid != os.getpid() or not _thread.is_alive():
        _pid = os.getpid()
        _thread = threading.Thread(target=_beat_forever, daemon=True, name="heartbeats")
        _thread.start()
        threading.Thread(target=_watch_forever, daemon=True, name="heartbeat-fence").start()


def _beat_forever():
    global _last_beat
    while True:
        time.sleep(settings.JOBS_HEARTBEAT_SECONDS)
        with _lock:
            held = list(_held.items())
        if not held:
            _last_beat = time.monotonic()
            connection.close()  # nothing to beat for: give the connection back until there is
            continue
        # Drop a connection the database closed (a restart) or one past CONN_MAX_AGE.
        close_old_connections()
        beaten = True
        for (run_id, attempt), one in held:
            if one.quiet:
                continue
            try:
                _beat(run_id, attempt, one)
            except Exception:
                beaten = False
                logger.warning("heartbeat of run %s failed; retrying", run_id, exc_info=True)
                close_old_connections()
        quiet = [(key, one) for key, one in held if one.quiet]
        if quiet:
            try:
                _beat_quiet(quiet)
            except Exception:
                beaten = False
                logger.warning("heartbeat of %s runs of a bundle failed; retrying", len(quiet), exc_info=True)
                close_old_connections()
        if beaten:
            _last_beat = time.monotonic()


def _watch_forever():
    probed_unreachable = False  # whether the broker's last probe, in this silence, failed
    said = False  # whether this silence was logged as the database's, not the host's
    while True:
        time.sleep(min(1.0, settings.JOBS_HEARTBEAT_SECONDS))
        silent = time.monotonic() - _last_beat
        with _lock:
            held = list(_held.items())
        if not held or silent < min(settings.JOBS_HEARTBEAT_SECONDS * 1.5, settings.JOBS_FENCE_AFTER_SECONDS):
            probed_unreachable = said = False
            continue
        if silent < settings.JOBS_FENCE_AFTER_SECONDS or not probed_unreachable:
            # From the first missed beat on, so the broker's answer is in when the fence is due: a
            # probe across a cut link takes its whole timeout, and the leader declares the attempt
            # lost one heartbeat after the fence.
            probed_unreachable = not broker_reachable(timeout=min(2.0, settings.JOBS_HEARTBEAT_SECONDS))
            silent = time.monotonic() - _last_beat
        if silent < settings.JOBS_FENCE_AFTER_SECONDS:
            continue
        if not probed_unreachable:
            if not said:
                said = True
                logger.warning("no heartbeat has gone through for %.0f s, but the broker answers: the database is "
                               "away, not this host; the attempts go on", silent)
            continue
        fence(held, f"this worker could not renew its heartbeat for {silent:.0f} s nor reach the broker "
                    "(its host cut off?); it stopped the attempt itself")


def broker_reachable(timeout=2.0):
    try:
        # connect_timeout is AMQP's; Redis (and Sentinel) take theirs from the transport options.
        quick = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
        with current_app.connection_for_write(connect_timeout=timeout, transport_options=quick) as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
        return True
    except Exception:
        return False


def fence(held, reason):
    """Stop these attempts ((key, entry) pairs): the executor kills a command's process group; a
    function still running after the kill grace ends with its process (Celery delivers its
    message again, and the run is lost and run again, from its lost budget)."""
    for (run_id, attempt), entry in held:
        logger.error("run %s attempt %s: %s", run_id, attempt, reason)
        entry.fenced = reason
        entry.stopped.set()
        release(run_id, attempt)
    deadline = time.monotonic() + settings.JOBS_KILL_GRACE_SECONDS + 1
    while time.monotonic() < deadline:
        if all(entry.done for _, entry in held):
            return
        time.sleep(0.1)
    logger.error("an attempt did not stop within the kill grace after fencing; ending this process")
    os._exit(70)


def _beat_quiet(quiet):
    alive = lifecycle.heartbeat_many([key for key, _ in quiet])
    for key, entry in quiet:
        if key not in alive:
            entry.stopped.set()
            release_quiet(key, entry)


def _beat(run_id, attempt, entry):
    output = entry.output
    if output is None or output.total == entry.saved_bytes:
        alive = lifecycle.heartbeat(run_id, attempt)
    else:
        text, written = output.snapshot()
        alive = lifecycle.heartbeat(run_id, attempt, output=text, output_bytes=written)
        entry.saved_bytes = written
    if not alive and entry.worker:
        alive = lifecycle.restore_claim(run_id, attempt, entry.worker, os.getpid())
    if alive:
        return
    if lifecycle.declared_lost(run_id, attempt):
        # Silent past the lost window while alive (this process frozen or starved): its rerun may
        # be running now. It ends as a fenced attempt does, a function with its process if it
        # does not stop, rather than run on beside its rerun to its end however far that is.
        fence([((run_id, attempt), entry)], "the leader declared this attempt lost while this process was "
                                            "silent (frozen or starved?); it stopped the attempt itself")
        return
    entry.stopped.set()
    release(run_id, attempt)
