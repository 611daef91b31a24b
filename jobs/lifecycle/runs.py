"""Runs made and moved outside an attempt: created (run now, due slots, a backfill, a workflow step),
queued (a jittered or held run whose time came, a retry whose backoff passed, a publish again, a
finished run rerun), skipped, cancelled, or given up on when they never started.

Every move goes through ``moves.transition``: a conditional UPDATE on (run, status, attempt)
along the state machine of ``moves.MOVES``. A run that ends tells ``events`` in the same
transaction. Times come from the database's clock (jobs.timing.clock).
"""

import functools
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from ..definitions.jobs import stopped_by_soft_time_limit
from ..execution import publishing
from ..models import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    AttemptOutcome,
    Job,
    JobAttempt,
    JobRun,
    RunEnd,
    RunRerun,
    RunStatus,
    RunTrigger,
)
from ..telemetry import tracing
from ..timing import clock
from . import arrays, bundling, events, limits, postgres, rollup
from .moves import move_locked, transition

logger = logging.getLogger(__name__)


# --- publishing a run's message

def time_limits(job):
    """(hard, soft) Celery time limits of an attempt. The hard limit is a backstop behind our own
    timeout handling (the soft limit for functions, the process-group kill for commands)."""
    return _time_limits(job.timeout_seconds, job.kind)


def _time_limits(timeout_seconds, kind):
    hard = timeout_seconds + 2 * settings.JOBS_KILL_GRACE_SECONDS + 5
    return hard, timeout_seconds if stopped_by_soft_time_limit(kind) else None


def message_for(run_id, attempt, job):
    return _message(run_id, attempt, job.queue, job.kind, job.timeout_seconds, job.priority, job.pk)


def _message(run_id, attempt, queue, kind, timeout_seconds, priority, job_id=None):
    hard, soft = _time_limits(timeout_seconds, kind)
    return publishing.Message(run_id, attempt, queue or settings.JOBS_DEFAULT_QUEUE, hard, soft, priority,
                              job_id=job_id)


def publish_many(items):
    """Publish (run id, attempt, job) triples, one broker round trip per thousand (jobs.execution.publishing)."""
    publish_messages([message_for(run_id, attempt, job) for run_id, attempt, job in items])


def publish_messages(messages):
    """``publishing.publish``, each message in its run's trace when traces are on; otherwise the
    runs of short jobs in bundles (``bundling``)."""
    if not tracing.enabled():
        publishing.publish(bundling.grouped(messages, [message.job_id for message in messages]))
        return
    stored = dict(JobRun.objects.filter(pk__in=[m.run_id for m in messages]).values_list("pk", "traceparent"))
    messages, spans = tracing.publishing(messages, stored)
    try:
        publishing.publish(messages)
    except Exception as exc:
        tracing.published(spans, error=exc)
        raise
    tracing.published(spans)


def publish_on_commit(items):
    """Publish (run id, attempt, job) triples once the transaction that queued them commits."""
    if items:
        transaction.on_commit(lambda: _publish_logged(items))


def _publish_logged(items):
    publish_messages_or_log([message_for(run_id, attempt, job) for run_id, attempt, job in items])


def publish_messages_or_log(messages, grouped=False):
    """``publish_messages``, a failure logged. ``grouped``: the messages are already as they go to
    the broker (``bundling.grouped``), sent as they are."""
    try:
        publishing.publish(messages) if grouped else publish_messages(messages)
    except Exception:
        # The runs stay queued in the database; the monitor publishes them again.
        first = messages[0].runs[0] if isinstance(messages[0], publishing.Bundle) else messages[0][:2]
        logger.exception("could not publish %s message(s) (first: run %s attempt %s); the monitor will retry",
                         len(messages), *first)


# --- creating runs

def create_run(job, trigger=RunTrigger.MANUAL, user=None, key_slot=None, params=None):
    """A run of ``job`` queued now (run now, a workflow step), published once the transaction
    commits. Its slot is the moment it was made; two made in the same microsecond take the next
    free one (one run per job and slot). ``key_slot``: the slot of the run this one re-runs, whose
    idempotency key it keeps (a workflow re-run's step). ``params``: the values of the job's
    parameters, already resolved (``jobs.parameters.resolve``); None: the defaults."""
    now = clock.now()
    with transaction.atomic():
        for offset in range(100):
            row = (job, now + timedelta(microseconds=offset), RunStatus.QUEUED, "", None)
            if created := create_runs([row], now, trigger=trigger, user=user, params=params):
                break
        else:
            raise RuntimeError(f"no free slot for a run of job {job.pk}")
        run_id = created[0][0]
        if key_slot is not None:
            JobRun.objects.filter(pk=run_id).update(key_slot=key_slot)
        # Only ever forward: a tick that made a later run of the job keeps it as the last one.
        Job.objects.filter(Q(last_run__isnull=True) | Q(last_run__lt=run_id), pk=job.pk).update(last_run=run_id)
        publish_on_commit([(run_id, 1, job)])
    run = JobRun.objects.get(pk=run_id)
    run.job = job
    return run


_COLUMNS = (
    "job_id", "status", "trigger", "scheduled_for", "attempt", "max_attempts", "created_at",
    "queued_at", "finished_at", "next_attempt_at", "publish_count", "worker", "output", "output_bytes", "error",
    "reason", "triggered_by_id", "lost_attempts", "params", "job_version",
)
# PostgreSQL takes a whole batch as one array per column: a statement of a dozen parameters
# instead of a dozen per run, which the driver would otherwise parse and adapt one by one.
_UNNEST_COLUMNS = (("job_id", "bigint"), ("status", "varchar"), ("scheduled_for", "timestamptz"),
                   ("max_attempts", "integer"), ("queued_at", "timestamptz"), ("finished_at", "timestamptz"),
                   ("next_attempt_at", "timestamptz"), ("reason", "varchar"), ("params", "jsonb"),
                   ("job_version", "integer"))
CREATED_STATUSES = {RunStatus.QUEUED, RunStatus.PENDING, RunStatus.SKIPPED}


def create_runs(rows, now, trigger=RunTrigger.SCHEDULE, user=None, params=None):
    """Insert runs from (job, slot, status, reason, start at) rows, leaving alone any slot that
    already has one (the one-run-per-slot constraint fences a second scheduler, a restart or a
    repeated backfill). Returns (id, job id, status, slot) of the runs made. A run is born queued, waiting
    (pending until ``start at``, or until the job's earlier run ends) or skipped (with its reason);
    the caller publishes the queued ones once its transaction commits (a run queued for a later
    start time: jobs.lifecycle.ahead holds its message until then). ``params``: the values of
    the job's parameters every run gets (resolved); None: each job's defaults (a scheduled run's).
    Each run names the version of its job it was made from (``job.version`` as the caller read it:
    a column of the job, copied, not looked up per run)."""
    assert all(status in CREATED_STATUSES for _, _, status, _, _ in rows)
    traceparents, spans = tracing.dispatching(rows, trigger)
    with transaction.atomic():
        created = _insert_runs(rows, now, trigger, user, params, traceparents)
        if spans:  # which rows became runs (a slot that had one already did not)
            made = dict(JobRun.objects.filter(pk__in=[run_id for run_id, *_ in created])
                        .values_list("traceparent", "pk"))
            tracing.dispatched(spans, [made.get(t) for t in traceparents])
        # A run born skipped has ended: its end is counted like any other (RunEnd).
        RunEnd.objects.bulk_create([RunEnd(run_id=run_id, job_id=job_id, status=status, ended_at=now)
                                    for run_id, job_id, status, _ in created if status == RunStatus.SKIPPED])
    # A run born skipped (catch-up, overlap) ends at birth without an event (one would cost the
    # tick a query per run): notifications.watch alerts the missed ones on its next pass.
    return created


def _params_text(job, params, texts):
    """The run's values as JSON text, each job's defaults made once (``texts``: by job id)."""
    if params is not None:
        return json.dumps(params)
    if job.pk not in texts:
        texts[job.pk] = json.dumps(job.default_params())
    return texts[job.pk]


def _insert_runs(rows, now, trigger, user, params=None, traceparents=None):
    """``traceparents``: of each row, stored on its run (traces on), or None."""
    user_id = getattr(user, "pk", None)
    traced = traceparents is not None
    table = JobRun._meta.db_table
    created, texts = [], {}
    for start in range(0, len(rows), 5000):
        chunk = rows[start:start + 5000]
        # A run born queued with a start time is queued for that time (jobs.lifecycle.ahead holds
        # its message until then); one born pending waits for it (release_timed).
        values = [(job.pk, status, slot, job.max_attempts,
                   (start_at or now) if status == RunStatus.QUEUED else None,
                   now if status == RunStatus.SKIPPED else None,
                   start_at if status == RunStatus.PENDING else None, reason, _params_text(job, params, texts),
                   job.version or None)
                  for job, slot, status, reason, start_at in chunk]
        if traced:
            values = [(*row, traceparent) for row, traceparent in zip(values, traceparents[start:start + 5000],
                                                                      strict=True)]
        unnest_columns = _UNNEST_COLUMNS + ((("traceparent", "varchar"),) if traced else ())
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                names = ", ".join(name for name, _ in unnest_columns)
                casts = ", ".join(f"%s::{kind}[]" for _, kind in unnest_columns)
                cursor.execute(
                    f"INSERT INTO {table} ({names}, trigger, attempt, created_at, publish_count, worker, output, "
                    f"output_bytes, error, triggered_by_id, lost_attempts) "
                    f"SELECT v.*, %s, 1, %s, 0, '', '', 0, '', %s::bigint, 0 FROM unnest({casts}) AS v "
                    "ON CONFLICT (job_id, scheduled_for) DO NOTHING RETURNING id, job_id, status, scheduled_for",
                    [trigger, now, user_id] + [arrays.literal(column) for column in zip(*values, strict=True)],
                )
            else:
                # Times as the ORM writes them: SQLite compares them as text, and the driver's own
                # form of an aware datetime (with "+00:00") sorts after the ORM's for the same moment.
                at = connection.ops.adapt_datetimefield_value
                columns = _COLUMNS + (("traceparent",) if traced else ())
                placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
                cursor.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                    + ", ".join([placeholders] * len(values))
                    + " ON CONFLICT (job_id, scheduled_for) DO NOTHING RETURNING id, job_id, status, scheduled_for",
                    [p for job_id, status, slot, attempts, queued_at, finished_at, start_at, reason, *rest in values
                     for p in (job_id, status, trigger, at(slot), 1, attempts, at(now), at(queued_at),
                               at(finished_at), at(start_at), 0, "", "", 0, "", reason, user_id, 0, *rest)],
                )
                # SQLite returns the slot as a naive time in UTC: the row's own, aware, is kept.
                slots = {(job.pk, _naive_utc(slot)): slot for job, slot, *_ in chunk}
                created += [(run_id, job_id, status, slots[job_id, _naive_utc(slot)])
                            for run_id, job_id, status, slot in cursor.fetchall()]
                continue
            created += cursor.fetchall()
    return created


def _naive_utc(moment):
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


# --- queueing

def queue_due_retries(now=None, limit=1000):
    """Move runs whose backoff has passed to their next attempt and publish them."""
    now = now or clock.now()
    due = list(JobRun.objects.filter(status=RunStatus.RETRYING, next_attempt_at__lte=now)
               .select_related("job").order_by("next_attempt_at")[:limit])
    queued = []
    with transaction.atomic():
        for run in due:
            if transition(run, RunStatus.QUEUED, frm=[RunStatus.RETRYING], attempt=run.attempt + 1, queued_at=now,
                              next_attempt_at=None):
                queued.append((run.pk, run.attempt, run.job))
        publish_on_commit(queued)
    return len(queued)


def release_pending(now=None, limit=1000):
    """Queue waiting runs whose time has come: those waiting for a start time (release_timed), and
    a run held back by the 'queue' overlap policy once no earlier run of its job is active."""
    return release_timed(now) + release_held(now, limit)


PAUSED_BEFORE_START = "the job was paused before the run's start time"
# What publishing a run reads of its job (message_for).
RELEASE_FIELDS = ("status", "attempt", "next_attempt_at", "job__queue", "job__kind", "job__timeout_seconds",
                  "job__priority")


def release_timed(now=None, batch=2000, limit=100_000):
    """Queue the runs waiting for a start time that has come (a jittered run; a slot dispatched
    ahead, JOBS_DISPATCH_AHEAD_SECONDS), ``batch`` of them a transaction, each batch published once
    it has committed (while the next batch is released, when more follow). A paused job's waiting
    runs are skipped first. Returns how many runs were queued.

    On PostgreSQL a batch is one statement (jobs.lifecycle.postgres.release: the move of
    ``moves.move_locked``, returning what the messages need): building a run and its job as
    models took half of a burst's release."""
    now = now or clock.now()
    return _release_timed(now, batch, limit, postgres.release if connection.vendor == "postgresql" else _release_by_orm)


def _release_timed(now, batch, limit, release_batch):
    _skip_paused_waiting(now, limit)
    queued, publishing_batch = 0, None
    while queued < limit:
        rows = release_batch(now, batch)
        if publishing_batch is not None:
            publishing_batch.result()
            publishing_batch = None
        messages = [_message(*row) for row in rows]
        more = len(rows) == batch
        if more and not connection.in_atomic_block:
            publishing_batch = _release_publisher().submit(publish_messages_or_log, messages)
        elif messages:  # at once, or when the caller's transaction commits
            transaction.on_commit(functools.partial(publish_messages_or_log, messages))
        queued += len(rows)
        if not more:
            break
    if publishing_batch is not None:
        publishing_batch.result()
    return queued


@functools.cache
def _release_publisher():
    """One thread (and, jobs.execution.publishing's being per thread, one broker connection) that publishes a
    burst's batches while the next is released."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-publisher")


def _skip_paused_waiting(now, limit):
    skip_paused_before_start(JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__lte=now,
                                                   job__enabled=False)[:limit], RunStatus.PENDING, now)


def skip_paused_before_start(runs, status, now):
    """Skip ``runs`` (a query of runs in ``status``) whose jobs were paused before their start."""
    with transaction.atomic():
        for run in runs.select_related("job").select_for_update(skip_locked=True, of=("self",)):
            if transition(run, RunStatus.SKIPPED, frm=[status], finished_at=now, reason=PAUSED_BEFORE_START):
                events.emit("skipped", run=run)


def _release_by_orm(now, batch):
    """postgres.release through the ORM (SQLite): the batch's rows for their messages."""
    with transaction.atomic():
        runs = list(JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__lte=now, job__enabled=True)
                    .order_by("next_attempt_at").select_related("job").only(*RELEASE_FIELDS)
                    .select_for_update(skip_locked=True, of=("self",))[:batch])
        going = move_locked(runs, RunStatus.QUEUED, frm=[RunStatus.PENDING], queued_at=now,
                                   next_attempt_at=None, reason="")
    return [(run.pk, run.attempt, run.job.queue, run.job.kind, run.job.timeout_seconds, run.job.priority, run.job_id)
            for run in going]


def release_held(now=None, limit=1000):
    """Queue runs held back by the 'queue' overlap policy once no earlier run of their job is
    active, one a job at a time."""
    now = now or clock.now()
    held = JobRun.objects.filter(status=RunStatus.PENDING, next_attempt_at__isnull=True).exclude(
        job__runs__status__in=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING])
    queued, seen_jobs = [], set()
    with transaction.atomic():
        for run in held.select_related("job").order_by("scheduled_for")[:limit]:
            if run.job_id in seen_jobs:
                continue  # one held run per job at a time: the next waits for this one
            seen_jobs.add(run.job_id)
            if transition(run, RunStatus.QUEUED, frm=[RunStatus.PENDING], queued_at=now, reason=""):
                queued.append((run.pk, run.attempt, run.job))
        publish_on_commit(queued)
    return len(queued)


def free_room(job):
    """A run of ``job`` left ``running`` (or left the line of waiting runs): once that commits, wake
    the runs of its limit that now have room (``wake_waiting``)."""
    if job.limit_key:
        transaction.on_commit(functools.partial(_wake_logged, job.limit_key))


def _wake_logged(key):
    try:
        wake_waiting(key)
    except Exception:  # the run's change is committed; the monitor wakes them on its next pass
        logger.exception("could not wake the runs waiting for limit %s; the monitor will", key)


def wake_waiting(key, published_before=None):
    """Publish again the first runs waiting for room under ``key``, as many as there is room for
    (all of them when the key no longer names a limit): each is claimed anew (jobs.lifecycle.limits).
    ``published_before``: leave out those published since (their message may still be on its way)."""
    with transaction.atomic():
        limit = limits.locked(key)
        # Read under the lock: a claim that turns a run away holds it until the run is marked.
        if not limits.waiting(key).exists():
            return 0
        now = clock.now()
        free = 1000 if limit is None else min(limits.room(limit, now), 1000)
        first = list(limits.waiting(key).select_related("job")[:free]) if free else []
        if published_before is not None:
            first = [run for run in first if run.queued_at is None or run.queued_at < published_before]
        return publish_again(first)


def wake_all_waiting(now=None):
    """``wake_waiting`` for every key that has runs waiting (the leader's monitor, every pass), but
    not a run published again in the last two passes."""
    now = now or clock.now()
    keys = (JobRun.objects.filter(status=RunStatus.QUEUED, waiting_since__isnull=False)
            .values_list("job__limit_key", flat=True).distinct().order_by())
    recently = now - timedelta(seconds=max(2 * settings.JOBS_MONITOR_SECONDS, 5))
    return sum(wake_waiting(key, published_before=recently) for key in list(keys))


def publish_again(found):
    """Publish queued runs again (the broker lost their messages); each still queued at the same
    attempt is stamped with a new queued_at and one more publish."""
    now = clock.now()
    again = []
    with transaction.atomic():
        for run in found:
            if transition(run, RunStatus.QUEUED, frm=[RunStatus.QUEUED], queued_at=now,
                              publish_count=run.publish_count + 1):
                again.append((run.pk, run.attempt, run.job))
        publish_on_commit(again)
    return len(again)


# --- ending a run that is not running

def skip_past_deadline(now=None):
    """Skip scheduled runs still waiting to start past their job's start deadline (a 'missed' event)."""
    now = now or clock.now()
    with_deadline = Job.objects.filter(start_deadline_seconds__isnull=False).values("pk")
    waiting = JobRun.objects.filter(
        job__in=with_deadline, status__in=[RunStatus.PENDING, RunStatus.QUEUED], attempt=1,
        trigger=RunTrigger.SCHEDULE,
    ).select_related("job")
    return sum(miss_if_past_deadline(run, now) for run in waiting)


def miss_if_past_deadline(run, now):
    """Skip ``run`` if it is a scheduled first attempt that did not start by its job's start deadline."""
    deadline = run.job.start_deadline_seconds
    if not deadline or run.trigger != RunTrigger.SCHEDULE or run.attempt != 1:
        return False
    late = (now - run.scheduled_for).total_seconds()
    if late <= deadline:
        return False
    with transaction.atomic():
        moved = transition(run, RunStatus.SKIPPED, frm=[RunStatus.PENDING, RunStatus.QUEUED], finished_at=now,
                               reason=f"missed: not started within {deadline} s of its slot ({late:.0f} s late)")
        if moved:
            events.emit("skipped", run=run)
            free_room(run.job)
    return moved


def give_up_waiting(run, now, error):
    """Fail a run that never started (no worker consumes its queue)."""
    with transaction.atomic():
        moved = transition(run, RunStatus.FAILED, frm=[RunStatus.PENDING, RunStatus.QUEUED], finished_at=now,
                               error=error)
        if moved:
            events.emit("failed", run=run)
    return moved


def cancel(run, reason="cancelled"):
    """Cancel a run that has not finished, whichever attempt it is at. Idempotent: a finished run
    is left as it is (returns False). A running attempt is stopped by its worker, which finds the
    run no longer its own at its next heartbeat."""
    for _ in range(5):  # the run may move to its next attempt under our feet: read it again
        current = JobRun.objects.filter(pk=run.pk).values_list("status", "attempt").first()
        if current is None or current[0] not in ACTIVE_STATUSES:
            break
        run.status, run.attempt = current
        now = clock.now()
        with transaction.atomic():
            if transition(run, RunStatus.CANCELLED, frm=ACTIVE_STATUSES, finished_at=now, reason=reason[:255]):
                JobAttempt.objects.filter(run_id=run.pk, number=run.attempt, outcome=AttemptOutcome.RUNNING).update(
                    outcome=AttemptOutcome.CANCELLED, finished_at=now)
                events.emit("cancelled", run=run)
                free_room(run.job)
                run.refresh_from_db()
                return True
    run.refresh_from_db()
    return False


# --- running a finished run again

# What a rerun clears of the run's last end; its attempts keep what each of them did.
RERUN_CLEARS = {"started_at": None, "finished_at": None, "heartbeat_at": None, "next_attempt_at": None,
                "waiting_since": None, "worker": "", "output": "", "output_bytes": 0,
                "result": None, "error": "", "reason": "", "lost_attempts": 0}


def rerun(run, user=None):
    """Run a finished run again as itself: queued at its next attempt, with the same slot (so the
    same idempotency key) and its earlier attempts kept, and a fresh budget of retries and lost
    attempts (its job's). Published once the transaction commits. False when the run has not ended
    (or another rerun moved it first)."""
    previous, now = run.status, clock.now()
    if previous not in TERMINAL_STATUSES:
        return False
    if connection.vendor != "postgresql":
        _fold_end_of(run)
    with transaction.atomic():
        attempt = run.attempt + 1
        if not transition(run, RunStatus.QUEUED, frm=sorted(TERMINAL_STATUSES), attempt=attempt, queued_at=now,
                          max_attempts=run.attempt + run.job.max_attempts, **RERUN_CLEARS):
            return False
        RunRerun.objects.create(run=run, attempt=attempt, previous_status=previous, by=user, created_at=now)
        publish_on_commit([(run.pk, attempt, run.job)])
    return True


def _fold_end_of(run):
    """Outside PostgreSQL the ends table keys an end by its run: one not yet folded into the figures
    is folded now, so the rerun's own end has room."""
    while RunEnd.objects.filter(run_id=run.pk).exists() and rollup.fold():
        pass
