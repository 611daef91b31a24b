"""The scheduler watchdog: the workers notice when no scheduler ticks, so an outage of every beat
does not go unnoticed (the monitor and the slot checks run on the leader, which is what is down).

Each worker runs a thread (started when the worker is ready, ``start``) that, every
``interval()``, takes or renews the lease ``scheduler-watchdog`` (jobs/coordination/leases.py): one worker at a
time judges, the others stand by and take over when its lease expires. The holder reads the
leader lease's ``last_tick_at`` against the database's clock:

- no tick for ``JOBS_SCHEDULER_STALE_SECONDS`` (or none ever) and no outage open: it opens a
  ``SchedulerOutage`` and emits ``scheduler_down`` (jobs.lifecycle.events; notifications turns it
  into deliveries), in one transaction fenced on its lease: once per outage, whichever worker holds
  the lease and however often it looks;
- a tick within that time and an outage open: it closes the outage and emits ``scheduler_recovered``.

While the scheduler is down the holder also runs the duties other apps registered here
(``register``): the leader's monitor, which would send notifications that wait for a retry, is down.
"""

import contextlib
import logging
import os
import socket
import threading

from django.conf import settings
from django.db import Error as DatabaseError
from django.db import close_old_connections, transaction

from ..coordination import leases
from ..lifecycle import events
from ..models import SchedulerOutage
from ..timing import clock

logger = logging.getLogger(__name__)

LEASE_KEY = "scheduler-watchdog"
DOWN, RECOVERED, STALE, OK, STANDBY = "down", "recovered", "stale", "ok", "standby"

_duties = {}
_thread = None
_stop = threading.Event()


def register(name, duty):
    """Run ``duty()`` on each pass of the watchdog's holder while no scheduler ticks."""
    _duties[name] = duty


def interval():
    """Seconds between two passes: a heartbeat, and at least four passes per stale period."""
    return max(0.2, min(settings.JOBS_HEARTBEAT_SECONDS, settings.JOBS_SCHEDULER_STALE_SECONDS / 4))


def lease_ttl():
    return max(3 * interval(), 2.0)


def health(now=None, state=None):
    """What an operator is shown: {'stale': bool, 'last_tick_at': the leader's last tick or None,
    'silent_seconds': since then (None when no scheduler ever ticked), 'outage': the open
    SchedulerOutage or None, 'stale_after': JOBS_SCHEDULER_STALE_SECONDS}. ``state``: the leader
    lease's (leases.state) when the caller read it already."""
    now = now or clock.now()
    state = (state if state is not None else leases.state(settings.JOBS_LEADER_KEY)) or {}
    last_tick = state.get("last_tick_at")
    silent = (now - last_tick).total_seconds() if last_tick else None
    limit = settings.JOBS_SCHEDULER_STALE_SECONDS
    return {"stale": silent is None or silent > limit, "last_tick_at": last_tick, "silent_seconds": silent,
            "outage": open_outage(), "stale_after": limit}


def open_outage():
    return SchedulerOutage.objects.filter(recovered_at__isnull=True).order_by("noticed_at").first()


class Watchdog:
    """One worker's side: ``check`` is one pass."""

    def __init__(self, name=None):
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.held = None
        self.first_pass_at = None  # a scheduler that never ticked gets a stale period from here

    def check(self):
        """Take or renew the lease, then judge: DOWN (an outage opened now), RECOVERED (closed now),
        STALE (still down, alerted already), OK, or STANDBY (another worker holds the lease)."""
        if self.held and not leases.renew(self.held, lease_ttl()):
            self.held = None
        if self.held is None:
            self.held = leases.take(LEASE_KEY, self.name, lease_ttl())
            if self.held is None:
                return STANDBY
        with transaction.atomic():
            leases.fence(self.held, lease_ttl())
            now = clock.now()
            seen = health(now)
            outage = seen["outage"]
            self.first_pass_at = self.first_pass_at or now
            starting = (now - self.first_pass_at).total_seconds() <= seen["stale_after"]
            if seen["last_tick_at"] is None and outage is None and starting:
                seen["stale"] = False  # a new deployment: its scheduler may still be starting
            if seen["stale"] and outage is None:
                outage = SchedulerOutage.objects.create(last_tick_at=seen["last_tick_at"], noticed_at=now,
                                                        noticed_by=self.name)
                logger.error("no scheduler has ticked since %s (more than %s s): scheduler down",
                             seen["last_tick_at"] or "ever", seen["stale_after"])
                events.emit(events.SCHEDULER_DOWN, outage=outage)
                verdict = DOWN
            elif not seen["stale"] and outage is not None:
                outage.recovered_at = now
                outage.save(update_fields=["recovered_at"])
                logger.warning("a scheduler ticks again (at %s): the outage noticed at %s is over",
                               seen["last_tick_at"], outage.noticed_at)
                events.emit(events.SCHEDULER_RECOVERED, outage=outage)
                verdict = RECOVERED
            else:
                verdict = STALE if seen["stale"] else OK
        if verdict in (DOWN, STALE):
            for name, duty in list(_duties.items()):
                try:
                    duty()
                except Exception:
                    logger.exception("watchdog duty %s failed; it runs again next pass", name)
        return verdict

    def release(self):
        if self.held is not None:
            with contextlib.suppress(DatabaseError):  # it expires by itself
                leases.release(self.held)
            self.held = None


def start(name=None):
    """Start this process's watchdog thread (once)."""
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    _stop.clear()
    _thread = threading.Thread(target=_watch, args=(Watchdog(name),), daemon=True, name="scheduler-watchdog")
    _thread.start()


def stop(wait=2.0):
    """Stop the thread, which gives the lease up (a standby takes it at once)."""
    _stop.set()
    if _thread is not None:
        _thread.join(wait)


def _watch(dog):
    while not _stop.wait(interval()):
        close_old_connections()
        try:
            dog.check()
        except Exception:
            # The next pass renews the lease, or finds it taken (a database that went away).
            logger.warning("scheduler watchdog pass failed; trying again", exc_info=True)
    dog.release()


def outage_text(seen):
    """One line for an operator: whether the scheduler is stale and since when."""
    if not seen["stale"]:
        return f"ticking (last tick {seen['silent_seconds']:.0f} s ago)"
    if seen["last_tick_at"] is None:
        return "stale: no scheduler has ever ticked"
    return (f"stale: no tick since {seen['last_tick_at']:%Y-%m-%d %H:%M:%S %Z} "
            f"({seen['silent_seconds']:.0f} s, more than {seen['stale_after']:g} s)")

