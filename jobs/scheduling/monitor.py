"""Repairs what the broker and the workers lose; runs on the scheduler leader.

- a ``running`` attempt whose heartbeat is older than a few intervals is ``lost`` (its worker died,
  SIGKILL fires no Celery signal) and is retried or failed per the job's policy;
- a ``running`` attempt past its hard timeout plus grace is ``timed_out`` (Celery's own limit
  is a backstop that may not have fired);
- a ``queued`` run that no worker claimed in time is published again when the broker holds fewer
  messages than the database has queued runs (the broker lost them: a Redis restart without
  persistence, a FLUSHALL, a Sentinel failover before the replica had them, a purged queue);
- a run waiting for room under its job's limit is published again when there is room (the
  lifecycle wakes it when a run of its limit ends; this pass is the safety net, and wakes a run
  that waited for a rate limit's minute to pass);
- a run that waited unstarted (``pending`` or ``queued``) longer than ``JOBS_MAX_WAIT_SECONDS`` (no
  worker consumes its queue) is ``failed``, so no state lasts forever: ``running`` is bounded by
  heartbeats and the timeout, ``retrying`` by its backoff, waiting states by this.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Count

from .. import lifecycle
from ..execution import publishing
from ..models import JobRun, RunStatus
from ..timing import clock

logger = logging.getLogger(__name__)


def check_once(now=None, watched_seconds=None):
    """One pass. ``watched_seconds``: as for ``mark_lost``. After a database outage the queued runs
    wait a whole lost window before they are published again or given up on: one may be a run
    whose claim the outage lost, still running, whose worker takes the claim back at its next
    heartbeat (``lifecycle.restore_claim``); the job is then neither run twice nor failed."""
    now = now or clock.now()
    settled = _settled(watched_seconds)
    report = {
        "timed_out": mark_overdue(now),
        "woken": lifecycle.wake_all_waiting(now),
        "republished": republish_unclaimed(now) if settled else 0,
        "never_started": fail_never_started(now) if settled else 0,
    }
    if any(report.values()):
        logger.info("monitor: %s", report)
    return report


def _lost_window():
    """How long an attempt may go without a heartbeat before it is lost."""
    return settings.JOBS_HEARTBEAT_SECONDS * settings.JOBS_LOST_AFTER_HEARTBEATS


def _settled(watched_seconds):
    """Whether the database has been reachable for a whole lost window (None: not watched)."""
    return watched_seconds is None or watched_seconds >= _lost_window()


def mark_lost(now=None, watched_seconds=None):
    """Runs whose worker stopped heartbeating: their attempt is lost (run again from the lost budget).
    Heartbeats are written with the database's clock and read against it: a worker whose own clock
    is off cannot make a healthy run look silent.

    ``watched_seconds``: how long this process has been reaching the database without a break.
    Silence that overlaps a database outage says nothing of the workers (their heartbeats could not
    be written either), so after one the monitor first gives them a whole lost window to beat again."""
    if not _settled(watched_seconds):
        return 0
    now = now or clock.now()
    stale_before = now - timedelta(seconds=_lost_window())
    lost = 0
    stale = JobRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=stale_before)
    for run in stale.only("pk", "attempt", "worker", "heartbeat_at"):
        silence = (now - run.heartbeat_at).total_seconds()
        if lifecycle.record_failure(run.pk, run.attempt, f"Lost: no heartbeat from {run.worker} for {silence:.0f} s",
                                    lost=True):
            lost += 1
    return lost


def mark_overdue(now):
    grace = settings.JOBS_KILL_GRACE_SECONDS * 2 + 10
    overdue = 0
    running = JobRun.objects.filter(status=RunStatus.RUNNING).select_related("job").only(
        "pk", "attempt", "started_at", "job__timeout_seconds")
    for run in running:
        past_deadline = run.started_at and now - run.started_at > timedelta(seconds=run.job.timeout_seconds + grace)
        if past_deadline and lifecycle.record_failure(
            run.pk, run.attempt, "Timed out: still running past the hard timeout", timed_out=True
        ):
            overdue += 1
    return overdue


def fail_never_started(now):
    limit = settings.JOBS_MAX_WAIT_SECONDS
    # A run waiting for room under a limit has been claimed (its queue has a worker); the runs
    # ahead of it, bounded by their timeouts, free the room it waits for.
    waiting = JobRun.objects.filter(status__in=[RunStatus.PENDING, RunStatus.QUEUED], waiting_since__isnull=True,
                                    created_at__lt=now - timedelta(seconds=limit)).select_related("job")
    return sum(lifecycle.give_up_waiting(
        run, now, f"Never started: waited more than {limit:.0f} s (JOBS_MAX_WAIT_SECONDS); "
                  f"is a worker consuming queue '{run.job.effective_queue}'?") for run in waiting[:1000])


def republish_unclaimed(now):
    deadline = now - timedelta(seconds=settings.JOBS_REPUBLISH_AFTER_SECONDS)
    # A run waiting for room under a limit has no message on purpose (wake_all_waiting publishes it),
    # nor yet one queued for a slot to come (its message held by the leader, lifecycle.ahead).
    queued = JobRun.objects.filter(status=RunStatus.QUEUED, waiting_since__isnull=True, queued_at__lte=now)
    stale = queued.filter(queued_at__lt=deadline).select_related("job")
    if not stale.exists():
        return 0
    queued_per_queue = {}
    for queue, count in queued.values_list("job__queue").annotate(n=Count("pk")):
        name = queue or settings.JOBS_DEFAULT_QUEUE
        queued_per_queue[name] = queued_per_queue.get(name, 0) + count
    candidates = list(stale.order_by("queued_at")[:1000])
    depth = publishing.queue_depth(sorted({run.job.effective_queue for run in candidates}))
    again = []
    for run in candidates:
        queue = run.job.effective_queue
        if depth[queue] is None:
            continue  # the broker does not answer: nothing to publish to
        # One message per queued run, though a bundle (jobs.lifecycle.bundling) carries many: counting a
        # message as a bundle's worth hid a lost message behind any backlog that the beat kept topping
        # up (tests/chaos/test_service_faults.py). A run of a bundle that waited long is published again
        # alone; whichever of its messages comes second finds it claimed or ended and is dropped.
        if depth[queue] >= queued_per_queue.get(queue, 0):
            continue  # every queued run still has a message waiting; the workers are just busy
        again.append(run)
        depth[queue] += 1
    return lifecycle.publish_again(again)
