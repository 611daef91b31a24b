"""The beat scheduler class: django-celery-beat's DatabaseScheduler plus our jobs.

``celery -A scheduler_site beat`` runs it (``beat_scheduler`` in the settings). Every node runs
the same loop; only the one holding the leader lock dispatches jobs, runs the monitor, and sends
ordinary periodic tasks, so a standby can take over within the lock's TTL.

The loop wakes up when the next job is due (at most every ``MIN_WAKEUP_SECONDS``, so a busy
minute is dispatched in batches), while the lease, retries, waiting runs and ordinary periodic
tasks are looked after once per ``JOBS_TICK_SECONDS`` and the monitor once per
``JOBS_MONITOR_SECONDS``: the cost of a wake-up is one indexed query when nothing is due.
"""

import logging
import time

from django.conf import settings
from django.db import close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

from notifications import sending, watch
from workflows.dispatch import dispatch_due_workflows

from . import dispatch, metrics, monitor, runs, tasks
from .leader import Leadership

logger = logging.getLogger(__name__)

MIN_WAKEUP_SECONDS = 0.1


class JobScheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        self.leadership = Leadership()
        self._next_lease = self._next_housekeeping = self._next_monitor = 0.0
        self._next_slot_check = time.monotonic() + settings.JOBS_SLOT_CHECK_SECONDS
        self._periodic_delay = 0.0
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        tick_seconds = settings.JOBS_TICK_SECONDS
        now = time.monotonic()
        if now >= self._next_lease or not self.leadership.is_leader:
            self._next_lease = now + self.leadership.ttl / 3
            if not self.leadership.refresh():
                return min(tick_seconds, self.leadership.ttl / 3)
        try:
            close_old_connections()
            report = dispatch.dispatch_due()
            dispatch_due_workflows()
            if report.due_jobs:
                logger.info("dispatched %s runs (%s skipped) for %s due jobs",
                            report.runs_created, report.slots_skipped, report.due_jobs)
            if now >= self._next_housekeeping:
                self._next_housekeeping = now + tick_seconds
                runs.queue_due_retries()
                runs.release_pending()
                runs.skip_past_deadline()
                self._periodic_delay = super().tick(*args, **kwargs)
                metrics.record_tick(self.leadership.client)
            if now >= self._next_monitor:
                self._next_monitor = now + settings.JOBS_MONITOR_SECONDS
                monitor.check_once()
                watch.check()
                sending.send_due()
            if settings.JOBS_SLOT_CHECK_SECONDS and now >= self._next_slot_check:
                # On a worker, not here: it reads every enabled job and must not delay dispatching.
                self._next_slot_check = now + settings.JOBS_SLOT_CHECK_SECONDS
                tasks.check_slots.apply_async(queue=settings.JOBS_DEFAULT_QUEUE)
            if report.due_jobs >= settings.JOBS_DISPATCH_BATCH:
                return 0  # a burst larger than one batch: go on at once
            until_next_job = dispatch.seconds_until_next_due()
        except Exception:
            # A database or broker outage must not kill beat; the next tick tries again.
            logger.exception("scheduler tick failed; retrying")
            close_old_connections()
            return tick_seconds
        if self._periodic_delay == 0:
            self._next_housekeeping = 0.0  # stock beat has more periodic tasks due now
        wake = min(until_next_job, self._next_housekeeping - time.monotonic(), self._periodic_delay or tick_seconds)
        return max(MIN_WAKEUP_SECONDS, min(wake, tick_seconds))

    def close(self):
        try:
            super().close()
        finally:
            self.leadership.release()
