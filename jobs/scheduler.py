"""The beat scheduler class: django-celery-beat's DatabaseScheduler plus our jobs.

``celery -A scheduler_site beat`` runs it (``beat_scheduler`` in the settings). Every node runs
the same loop; only the one holding the leader lock dispatches jobs, runs the monitor, and sends
ordinary periodic tasks, so a standby can take over within the lock's TTL.
"""

import logging
import time

from django.conf import settings
from django.db import close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

from notifications import sending, watch

from . import dispatch, monitor, runs
from .leader import Leadership

logger = logging.getLogger(__name__)


class JobScheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        self.leadership = Leadership()
        self._last_monitor = 0.0
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        tick_seconds = settings.JOBS_TICK_SECONDS
        if not self.leadership.refresh():
            return min(tick_seconds, self.leadership.ttl / 3)
        try:
            close_old_connections()
            report = dispatch.dispatch_due()
            runs.queue_due_retries()
            runs.release_pending()
            runs.skip_past_deadline()
            if report.due_jobs:
                logger.info("dispatched %s runs (%s skipped) for %s due jobs",
                            report.runs_created, report.slots_skipped, report.due_jobs)
            if time.monotonic() - self._last_monitor >= settings.JOBS_MONITOR_SECONDS:
                self._last_monitor = time.monotonic()
                monitor.check_once()
                watch.check()
                sending.send_due()
        except Exception:
            # A database or broker outage must not kill beat; the next tick tries again.
            logger.exception("scheduler tick failed; retrying")
            close_old_connections()
            return tick_seconds
        if report.due_jobs >= settings.JOBS_DISPATCH_BATCH:
            return 0  # a burst larger than one batch: go on at once
        # Wake up when the next job is due rather than at the next whole tick, so an idle
        # scheduler dispatches within milliseconds of a slot.
        return max(0.0, min(super().tick(*args, **kwargs), tick_seconds, dispatch.seconds_until_next_due()))

    def close(self):
        try:
            super().close()
        finally:
            self.leadership.release()
