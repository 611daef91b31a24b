"""The beat scheduler class: django-celery-beat's DatabaseScheduler plus our jobs.

``celery -A scheduler_site beat`` runs it (``beat_scheduler`` in the settings). Every node runs
the same loop; only the one holding the leader lock dispatches jobs, runs the monitor, and sends
ordinary periodic tasks, so a standby can take over within the lock's TTL.

The loop wakes up when the next job is due (at most every ``MIN_WAKEUP_SECONDS``, so a busy
minute is dispatched in batches), while the lease, retries, waiting runs and ordinary periodic
tasks are looked after once per ``JOBS_TICK_SECONDS`` and the monitor once per
``JOBS_MONITOR_SECONDS``: the cost of a wake-up is one indexed query when nothing is due.
"""

import contextlib
import logging
import time

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django_celery_beat.models import CrontabSchedule
from django_celery_beat.schedulers import DatabaseScheduler

from .. import kinds, lifecycle
from ..coordination import leases
from . import dispatch, duties, leader, monitor
from .pacing import Pace

logger = logging.getLogger(__name__)

MIN_WAKEUP_SECONDS = 0.1
# How often the leader looks for check-ins' slots that got no ping within their grace: a missed alert
# seconds late costs a check-in nothing, and the pass is a beat's largest idle cost after dispatch's own.
PING_CHECK_SECONDS = 5.0


class JobScheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        # A leader paused (SIGSTOP, a stalled host) inside any of its transactions loses its session,
        # and the rows it locked, once its lease could have passed to a standby.
        leases.limit_pauses(settings.JOBS_LEADER_TTL_SECONDS)
        self.leadership = leader.Leadership()
        self._next_lease = self._next_housekeeping = self._next_ping_check = self._next_monitor_duties = 0.0
        # The passes that read every unfinished run, paced by their own cost (pacing: a backlog of queued runs).
        self._lost_check = Pace("lost-run check", settings.JOBS_TICK_SECONDS)
        self._monitor = Pace("monitor pass", settings.JOBS_MONITOR_SECONDS)
        self._next_slot_check = time.monotonic() + settings.JOBS_SLOT_CHECK_SECONDS
        self._periodic_delay = 0.0
        self._pings_waiting, self._pings_until = False, None  # the queue of pings (lifecycle.record_queued_pings)
        self._adopted = False  # the runs queued ahead by an earlier leader: taken over once this one leads
        # Since when (monotonic) this node has led and reached the database without a break. Silence
        # older than that says nothing of the workers (a database outage kept their heartbeats out
        # too; a lease lost to an outage is the same outage): mark_lost waits a whole lost window.
        self._database_since = None
        self._busy = 0  # inside a tick or a sync: its queries may be in flight (close, below)
        self._interrupted = False
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        with self._at_work():
            return self._tick(*args, **kwargs)

    def sync(self):
        with self._at_work():
            super().sync()

    @contextlib.contextmanager
    def _at_work(self):
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1

    def _tick(self, *args, **kwargs):
        tick_seconds = settings.JOBS_TICK_SECONDS
        now = time.monotonic()
        if now >= self._next_lease or not self.leadership.is_leader:
            self._next_lease = now + self.leadership.ttl / 3
            close_old_connections()  # the lease is in the database: a connection a restart broke goes first
            held = self.leadership.held
            if not self.leadership.refresh():
                self._database_since = None
                return min(tick_seconds, self.leadership.ttl / 3)
            if self.leadership.held is not held:
                # Lost and taken again in one renewal (a frozen database outlived the lease): the
                # same outage, though no statement failed.
                self._database_since = None
                self._adopted = False
        try:
            close_old_connections()
            if not self._adopted:
                # The runs a leader before this one queued ahead, whose messages it may not have sent.
                lifecycle.adopt_runs_ahead()
                self._adopted = True
            lifecycle.publish_runs_ahead()  # first: a crowded slot's messages, held until the slot
            lifecycle.release_timed()  # runs waiting for their start (jittered)
            report = dispatch.dispatch_due(lease=self.leadership.held)
            if self._database_since is None:
                self._database_since = now
            duties.run("wakeup")
            if report.due_jobs:
                logger.info("dispatched %s runs (%s held for their slot, %s waiting, %s skipped) for %s due jobs",
                            report.runs_created, report.runs_ahead, report.runs_waiting, report.slots_skipped,
                            report.due_jobs)
            if self._pings_waiting or now >= self._next_housekeeping:
                # Check-ins' pings the web queued: recorded before their slots are looked at for a missing one.
                drained = lifecycle.record_queued_pings()
                self._pings_waiting, self._pings_until = drained.waiting, drained.until
            if now >= self._next_housekeeping:
                self._next_housekeeping = now + tick_seconds
                lifecycle.queue_due_retries()
                if self._lost_check.may_run(now, dispatch.seconds_until_next_due):
                    # Every tick while it is cheap, not every monitor pass: a lost run is run again at once.
                    with self._lost_check.timed():
                        monitor.mark_lost(watched_seconds=now - self._database_since)
                        lifecycle.skip_past_deadline()
                lifecycle.release_held()
                if now >= self._next_ping_check:  # check-in jobs' slots with no ping within their grace
                    self._next_ping_check = now + PING_CHECK_SECONDS
                    # (Not past the pings still queued: a slot whose ping waits there is not missed.)
                    lifecycle.fail_unpinged(kinds.running_elsewhere(), until=self._pings_until)
                lifecycle.fold_ends()  # the pages' figures, a tick behind the ends of runs
                duties.run("tick")
                self._periodic_delay = super().tick(*args, **kwargs)
                self.leadership.note_tick()
            if self._monitor.may_run(now, dispatch.seconds_until_next_due):
                with self._monitor.timed():
                    monitor.check_once(watched_seconds=now - self._database_since)
            if now >= self._next_monitor_duties:  # not paced: a notification's send may wait on the network
                self._next_monitor_duties = now + settings.JOBS_MONITOR_SECONDS
                duties.run("monitor")
            if settings.JOBS_SLOT_CHECK_SECONDS and now >= self._next_slot_check:
                # On a worker, not here: it reads every enabled job and must not delay dispatching.
                self._next_slot_check = now + settings.JOBS_SLOT_CHECK_SECONDS
                self.app.send_task("jobs.check_slots", queue=settings.JOBS_DEFAULT_QUEUE)
            if report.due_jobs >= settings.JOBS_DISPATCH_BATCH or self._pings_waiting:
                return 0  # a burst larger than one batch (or of pings): go on at once
            until_next_job = dispatch.seconds_until_next_due()
        except leases.LeaseLost as exc:
            logger.warning("scheduler %s lost the leadership; its tick was rolled back: %s", self.leadership.name, exc)
            self.leadership.held = None
            return tick_seconds
        except Exception as exc:
            # A database or broker outage must not kill beat; the next tick tries again.
            logger.exception("scheduler tick failed; retrying")
            if isinstance(exc, DatabaseError):
                self._database_since = None
            close_old_connections()
            return tick_seconds
        if self._periodic_delay == 0:
            self._next_housekeeping = 0.0  # stock beat has more periodic tasks due now
        wake = min(until_next_job, self._next_housekeeping - time.monotonic(), self._periodic_delay or tick_seconds)
        return max(MIN_WAKEUP_SECONDS, min(wake, tick_seconds))

    def _get_unique_timezone_names(self):
        # django-celery-beat 2.8+ builds its schedule-sync query (every 5 minutes, in the tick)
        # with a CASE branch per name this returns, and its distinct() runs over the model's
        # ordering fields too: one branch per crontab row, and the jobs' cron schedules are
        # crontab rows. At 100,000 jobs (6,000 rows) that was 6 s of a blocked tick. Each
        # timezone once (celery/django-celery-beat#947).
        return CrontabSchedule.objects.order_by("timezone").values_list("timezone", flat=True).distinct()

    def close(self):
        if self._busy:
            # Beat's SIGTERM handler (celery.apps.beat, install_sync_handler) calls this from the frame
            # it interrupted, maybe a query waiting on a lock: a query of its own would wait for that
            # connection's lock for ever. Its SystemExit unwinds the tick, and beat closes the scheduler
            # again on its way out (celery.beat.Service.start), here.
            self._interrupted = True
            return
        if self._interrupted:
            connection.close()  # the interrupted query may be in progress on it still
        try:
            super().close()
        finally:
            self.leadership.release()
