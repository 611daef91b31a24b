"""The worker's task for a bundle: many short runs in one message (``jobs.execute_bundle``).

- The bundle's runs are claimed in one statement (``lifecycle.claim_many``); those it did not claim
  are looked at one by one: one still queued (its job under a limit, past its start deadline) is
  published again as its own message, a duplicate is dropped (and, when its attempt's process died
  on this worker, lost and run again, as for a single run's message).
- The claimed runs run one after another in this pool process, each with its own timeout, output
  cap, attempt, heartbeat and idempotency key (``task.run_claimed``, as a single run). While they
  wait their turn, and once done until recorded, the heartbeat thread beats for them all in one
  statement; a run cancelled or declared lost meanwhile is skipped.
- Successes are recorded together (``lifecycle.succeed_many``) once the oldest has waited
  ``FLUSH_SECONDS`` or ``FLUSH_RUNS`` are waiting, and always before the task returns (acks_late:
  durable before the message is acknowledged). Failures are recorded at once, one by one, with
  their retries, events and notifications.
- A run that runs longer than its share (``split_seconds``) is split off: a watcher thread records
  the successes so far and hands the runs that have not started back (``lifecycle.hand_back``),
  published again as a bundle of their own; this process finishes the long run alone.

A process killed mid-bundle (SIGKILL, OOM) loses what it had not recorded: Celery delivers the
message again (reject_on_worker_lost), its recorded runs are dropped as done, and the others, still
``running`` at their attempt in a process that died, are lost and run again from their lost budget.
"""

import logging
import os
import signal
import threading
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from .. import kinds, lifecycle
from ..execution import publishing
from ..execution.publishing import BUNDLE_TASK_NAME
from ..lifecycle import attempts, bundling
from ..telemetry import logs
from . import heartbeats
from .task import run_claimed, through_outage

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.25  # the longest a done run waits for its success to be recorded, while others run
FLUSH_RUNS = 100


@shared_task(bind=True, name=BUNDLE_TASK_NAME, acks_late=True, reject_on_worker_lost=True,
             ignore_result=not settings.JOBS_TASK_RESULTS)
def execute_bundle(self, runs):
    return run_bundle(self.request.hostname or "unknown", [tuple(pair) for pair in runs], self.request.id or "")


def run_bundle(worker, runs, task_id):
    claimed = through_outage(lifecycle.claim_many, runs, worker, os.getpid(), task_id)
    turns = Turns(worker, task_id, claimed)
    taken = {(c.run.pk, c.run.attempt) for c in claimed}
    left = [pair for pair in runs if pair not in taken]
    if left:
        _not_claimed(left, worker)
    report = {"claimed": len(claimed), "not_claimed": len(left), "succeeded": 0, "failed": 0, "skipped": 0}
    watcher = threading.Thread(target=turns.watch, daemon=True, name="bundle-watch")
    watcher.start()
    try:
        while (one := turns.next()) is not None:
            report[_run_one(turns, one)] += 1
    finally:
        turns.finish()
        watcher.join()
        through_outage(turns.flush)
        turns.release_all()
    report["handed_back"] = turns.handed_back
    return report


def _not_claimed(pairs, worker):
    """A run of the message that the bundle's claim left: queued still (under a limit, or past its
    start deadline: the single claim decides), it goes as its own message; otherwise the delivery is
    a duplicate for it."""
    queued = []
    for run_id, attempt in pairs:
        run = attempts._queued(run_id, attempt)
        if run is not None:
            queued.append(run)
        else:
            attempts._not_claimed(run_id, attempt, worker)
    if queued:
        lifecycle.publish_again(queued)


def _run_one(turns, claimed):
    run = claimed.run
    key = (run.pk, run.attempt)
    entry = turns.entries.get(key)
    if entry is not None and entry.stopped.is_set():
        logger.info("run %s attempt %s of a bundle is no longer its attempt's (cancelled, or lost); skipped", *key)
        heartbeats.release_quiet(key, entry)
        return "skipped"
    since = turns.begin(claimed)
    started = lifecycle.started_at(claimed, since - turns.claimed_monotonic)
    spec = kinds.get(run.job.kind)

    def mark_started():
        through_outage(lifecycle.mark_started, run.pk, run.attempt, started)

    if spec is not None and spec.transactional(run.job):
        mark_started()  # its success is recorded in its own transaction, with its writes

    def succeed(run_id, attempt, output, output_bytes, result):
        turns.add(lifecycle.Success(run_id, attempt, started, output, output_bytes, result))

    limit = SoftTimeLimit(run.job.timeout_seconds) if spec is not None and spec.soft_time_limit else None
    try:
        with logs.about_run(run.pk, run.attempt):
            outcome = run_claimed(turns.worker, run, run.pk, run.attempt, succeed=succeed, time_limit=limit,
                                  before_failure=mark_started)
    except Exception:
        return "failed"  # recorded by run_claimed
    finally:
        turns.end()
    return "skipped" if outcome.get("refused") else "succeeded"


class SoftTimeLimit:
    """Celery's soft time limit for one run of a bundle: ``SoftTimeLimitExceeded`` raised in this
    (the pool process's main) thread once ``seconds`` have passed. Where signals cannot reach (a
    thread pool) there is none, as Celery has none there."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.armed = threading.current_thread() is threading.main_thread()

    def __enter__(self):
        if self.armed:
            self.before = signal.signal(signal.SIGALRM, _time_is_up)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.before)
        return False


def _time_is_up(signum, frame):
    raise SoftTimeLimitExceeded("the run's timeout in its bundle")


class Turns:
    """A bundle's claimed runs as this process works through them, shared with its watcher thread,
    which records the successes waiting and splits the bundle when a run overruns its share."""

    def __init__(self, worker, task_id, claimed):
        self.worker, self.task_id = worker, task_id
        self.claimed_monotonic = time.monotonic()
        self.cond = threading.Condition()
        self.flushing = threading.Lock()  # one recording of successes at a time
        self.waiting = list(claimed)  # not started, in the bundle's order
        self.pending = []  # lifecycle.Success not yet recorded
        self.entries = heartbeats.hold_quiet([(c.run.pk, c.run.attempt) for c in claimed])
        self.current, self.current_since, self.oldest_pending = None, None, None
        self.split = self.finished = False
        self.handed_back = 0

    def next(self):
        with self.cond:
            if self.split or not self.waiting:
                return None
            return self.waiting.pop(0)

    def begin(self, claimed):
        with self.cond:
            self.current, self.current_since = claimed, time.monotonic()
            self.cond.notify()
            return self.current_since

    def end(self):
        with self.cond:
            self.current = self.current_since = None
            due = self.pending and (len(self.pending) >= FLUSH_RUNS
                                    or time.monotonic() - self.oldest_pending >= FLUSH_SECONDS)
        if due:
            through_outage(self.flush)

    def add(self, success):
        key = (success.run_id, success.attempt)
        self.entries[key] = heartbeats.hold_quiet([key])[key]  # running until recorded: still beaten
        with self.cond:
            if not self.pending:
                self.oldest_pending = time.monotonic()
            self.pending.append(success)
            self.cond.notify()

    def finish(self):
        with self.cond:
            self.finished = True
            self.cond.notify()

    def flush(self):
        """Record the successes waiting, in one statement."""
        with self.flushing:
            with self.cond:
                pending, self.pending, oldest = self.pending, [], self.oldest_pending
            if not pending:
                return
            try:
                recorded = lifecycle.succeed_many(pending)
            except BaseException:
                # Kept for the next flush: a success dropped here would leave its run running, to be
                # declared lost and run a second time (the database away for a moment, say).
                with self.cond:
                    self.pending = pending + self.pending
                    self.oldest_pending = oldest
                raise
            for success in pending:
                key = (success.run_id, success.attempt)
                if key not in recorded:
                    logger.warning("run %s attempt %s: outcome refused, the run is no longer this attempt's "
                                   "(declared lost and run again, or cancelled)", *key)
                entry = self.entries.pop(key, None)
                if entry is not None:
                    heartbeats.release_quiet(key, entry)

    def release_all(self):
        for key, entry in list(self.entries.items()):
            heartbeats.release_quiet(key, entry)

    def watch(self):
        """The watcher thread: record successes that waited ``FLUSH_SECONDS`` while a run goes on, and
        split the bundle when a run overruns its share."""
        share = bundling.split_seconds()
        try:
            while True:
                with self.cond:
                    if self.finished:
                        return
                    now, wake = time.monotonic(), None
                    if self.pending:
                        wake = self.oldest_pending + FLUSH_SECONDS
                    overrun = (not self.split and self.current_since is not None
                               and now - self.current_since >= share)
                    if not overrun and self.current_since is not None and not self.split:
                        wake = min(wake or float("inf"), self.current_since + share)
                    if not overrun and (wake is None or wake > now):
                        self.cond.wait(None if wake is None else wake - now)
                        continue
                    if overrun:
                        self.split = True
                        rest, self.waiting = self.waiting, []
                        long_one, long_since = self.current, self.current_since
                recorded = self._flush_once()
                if overrun:
                    try:
                        through_outage(self._split_off, long_one, long_since, rest)
                    except Exception:
                        logger.exception("the bundle's watcher could not split it; the bundle goes on")
                if not recorded:
                    with self.cond:
                        if not self.finished:
                            self.cond.wait(1.0)  # the database away: try again in a second, not at once
        finally:
            publishing.forget()  # the broker connection of a split-off's publishing, if it made one
            connection.close()

    def _flush_once(self):
        """Record the successes waiting; False when that failed (they wait for the next try)."""
        try:
            self.flush()
            return True
        except (OperationalError, InterfaceError) as exc:
            logger.warning("database unavailable for a bundle's successes (%s); trying again in 1 s", exc)
        except Exception:
            logger.exception("the bundle's watcher could not record its successes; trying again in 1 s")
        connection.close()
        return False

    def _split_off(self, long_one, long_since, rest):
        run = long_one.run
        logger.info("run %s attempt %s overran its share of its bundle (%.1f s); %s run(s) of the bundle go on "
                    "elsewhere", run.pk, run.attempt, bundling.split_seconds(), len(rest))
        # From now on the long run is one like any other: the monitor sees its start (SLA, hard timeout).
        lifecycle.mark_started(run.pk, run.attempt,
                               lifecycle.started_at(long_one, long_since - self.claimed_monotonic))
        pairs = [(c.run.pk, c.run.attempt) for c in rest]
        for key in pairs:
            entry = self.entries.pop(key, None)
            if entry is not None:
                heartbeats.release_quiet(key, entry)
        back = lifecycle.hand_back(pairs, self.task_id)
        self.handed_back = len(back)
        jobs = {c.run.pk: c.run.job for c in rest}
        lifecycle.publish_many([(run_id, attempt, jobs[run_id]) for run_id, attempt in back])
