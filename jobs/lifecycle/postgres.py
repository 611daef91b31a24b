"""The lifecycle's claim and success on PostgreSQL: each one statement, one round trip, one commit
(the claim's without waiting for the flush: only an outcome must be durable before its message is
acknowledged, and its commit flushes the claim's with it);
and the release of a batch of runs whose start time has come (``release``), likewise.

They are the moves of jobs.lifecycle.attempts (``claim_by_orm``, ``succeed_by_orm``), written as
data-modifying CTEs, and tests/test_lifecycle_parity.py holds the two to the same result: the claim
is still a conditional UPDATE (one claimant wins) that inserts the attempt row in the same statement
and returns the run with its job (of a job that names no limit: jobs.lifecycle.limits claims those); the
success moves the run, finishes its attempt, records the end for the pages' figures (``RunEnd``) and ends
the job's failure streak (``streaks``) together,
unless a subscriber of the run's events wants this one (``events.wanted_sql``), in which case
nothing is changed and the caller records it the ordinary way, with its event. Times are the
database's (``statement_timestamp()``), as everywhere a time is compared across hosts.
"""

import functools

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections

from ..execution.publishing import task_id_for
from ..models import AttemptOutcome, Job, JobAttempt, JobRun, RunEnd, RunStatus, RunTrigger

# A run is found by its id, and its status then checked with IS NOT DISTINCT FROM (the same as =,
# the status is never NULL), which no index can serve: PostgreSQL once read every queued or running
# run through an index on the status instead, whenever its statistics said there were few
# (tests/test_worker_path.py reads the plans). No index names the status now (models.run), and none
# the columns the claim sets: the claim is a HOT update, its row rewritten in its page and no index touched.

# The claim returns what running the job needs; the rest stays deferred (loaded if job code asks).
# Of the run, what says which run and attempt it is, and the slot its idempotency key names: building
# and converting each column returned costs the worker CPU on every run (not the output, result or
# error: up to megabytes).
RUN_FIELDS = tuple(f for f in JobRun._meta.concrete_fields if f.name in {
    "id", "job", "status", "trigger", "scheduled_for", "key_slot", "attempt", "worker", "params"})
# (In the model's field order, which Model.from_db expects when fields are deferred.)
JOB_FIELDS = tuple(f for f in Job._meta.concrete_fields if f.name in {
    "id", "name", "tags", "kind", "target", "args", "kwargs", "environment", "http_method", "http_headers",
    "http_body", "http_ok_statuses", "working_directory", "memory_limit_mb", "cpu_limit_seconds",
    "max_open_files", "max_processes", "queue", "priority", "timeout_seconds", "sla_seconds", "max_retries",
    "secret_environment", "secret_http_headers", "parameters",
})
RUN_COLUMNS = [(f.column, f"r__{f.column}") for f in RUN_FIELDS]
JOB_COLUMNS = [(f.column, f"j__{f.column}") for f in JOB_FIELDS]
RUN, JOB, ATTEMPT, END = (JobRun._meta.db_table, Job._meta.db_table, JobAttempt._meta.db_table,
                          RunEnd._meta.db_table)

CLAIM_SQL = f"""
WITH commit_mode AS (
    -- The claim's commit does not wait for its flush (attempts.restore_claim says why that is safe);
    -- inside a caller's transaction (not alone) the commit is the caller's, and stays as it is.
    SELECT set_config('synchronous_commit', CASE WHEN %(alone)s THEN 'off' ELSE current_setting('synchronous_commit')
                      END, true)
), claimed AS (
    UPDATE {RUN} AS r
    SET status = '{RunStatus.RUNNING.value}', worker = %(worker)s, heartbeat_at = statement_timestamp(),
        started_at = statement_timestamp(), finished_at = NULL
    FROM {JOB} AS j, commit_mode
    WHERE r.id = %(run_id)s AND r.attempt = %(attempt)s AND r.status IS NOT DISTINCT FROM '{RunStatus.QUEUED.value}'
      AND j.id = r.job_id
      -- A job under a limit, or a run that waited for one, is claimed the slow way (lifecycle.limits).
      AND j.limit_key = '' AND r.waiting_since IS NULL
      -- attempts.past_start_deadline: a scheduled first attempt past its job's start deadline is not claimed
      AND NOT (r.trigger = '{RunTrigger.SCHEDULE.value}' AND r.attempt = 1 AND COALESCE(j.start_deadline_seconds, 0) > 0
               AND statement_timestamp() - r.scheduled_for > make_interval(secs => j.start_deadline_seconds))
    RETURNING {", ".join(f'r."{c}" AS "{a}"' for c, a in RUN_COLUMNS)},
              {", ".join(f'j."{c}" AS "{a}"' for c, a in JOB_COLUMNS)}
), attempt AS (
    INSERT INTO {ATTEMPT} (run_id, number, outcome, task_id, worker, pid, started_at, finished_at, heartbeat_at,
                           error, traceback)
    SELECT "r__id", %(attempt)s, '{AttemptOutcome.RUNNING.value}', %(task_id)s, %(worker)s, %(pid)s, statement_timestamp(), NULL,
           statement_timestamp(), '', ''
    FROM claimed
)
SELECT claimed.* FROM claimed
"""

# {wanted}: events.wanted_sql("succeeded"), a predicate over r and j.
SUCCEED_SQL = f"""
WITH target AS (
    SELECT r.id, ({{wanted}}) AS wanted
    FROM {RUN} AS r JOIN {JOB} AS j ON j.id = r.job_id
    WHERE r.id = %(run_id)s AND r.attempt = %(attempt)s AND r.status IS NOT DISTINCT FROM '{RunStatus.RUNNING.value}'
), moved AS (
    UPDATE {RUN}
    SET status = '{RunStatus.SUCCEEDED.value}', finished_at = statement_timestamp(), output = %(output)s,
        output_bytes = %(output_bytes)s, result = %(result)s, error = ''
    -- By its id, with target as a one-time condition (and the attempt below by its key, with moved):
    -- "id IN (SELECT id FROM target)" was planned as a scan of every running run.
    WHERE id = %(run_id)s AND attempt = %(attempt)s AND status IS NOT DISTINCT FROM '{RunStatus.RUNNING.value}'
      AND EXISTS (SELECT 1 FROM target WHERE NOT wanted)
    RETURNING id, job_id, started_at, finished_at
), finished AS (
    UPDATE {ATTEMPT}
    SET outcome = '{AttemptOutcome.SUCCEEDED.value}', finished_at = statement_timestamp(), error = '', traceback = ''
    WHERE run_id = %(run_id)s AND number = %(attempt)s AND outcome = '{AttemptOutcome.RUNNING.value}'
      AND EXISTS (SELECT 1 FROM moved)
), streak AS (
    -- streaks.count_end: a success ends the job's failure streak (written only when there was one)
    UPDATE {JOB} SET consecutive_failures = 0
    WHERE id = (SELECT job_id FROM moved) AND consecutive_failures > 0
), ended AS (
    -- RunEnd.record: the end, for the figures of the pages (folded later by lifecycle.rollup)
    INSERT INTO {END} (run_id, job_id, status, ended_at, seconds)
    SELECT id, job_id, '{RunStatus.SUCCEEDED.value}', finished_at, EXTRACT(EPOCH FROM finished_at - started_at) FROM moved
)
SELECT (SELECT count(*) FROM moved), (SELECT bool_or(wanted) FROM target)
"""


# moves.move_locked from pending to queued of runs (their jobs enabled) whose start time has come,
# oldest first, locked and skipped if another releaser holds them; what their messages need.
RELEASE_SQL = f"""
WITH due AS (
    SELECT r.id FROM {RUN} AS r JOIN {JOB} AS j ON j.id = r.job_id
    -- (the phase: what run_active_idx holds, in next_attempt_at's order; a pending run's phase is its status)
    WHERE r.phase = %(pending)s AND r.next_attempt_at <= %(now)s AND j.enabled
    ORDER BY r.next_attempt_at
    LIMIT %(batch)s
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE {RUN} AS r
SET status = %(queued)s, queued_at = %(now)s, next_attempt_at = NULL, reason = ''
FROM due, {JOB} AS j
WHERE r.id = due.id AND j.id = r.job_id AND r.status = %(pending)s
RETURNING r.id, r.attempt, j.queue, j.kind, j.timeout_seconds, j.priority, j.id
"""


def claim(run_id, attempt, worker, pid):
    """The claimed run (with its job loaded), or None when this delivery did not claim it."""
    params = {
        "run_id": run_id, "attempt": attempt, "worker": worker, "pid": pid,
        "task_id": task_id_for(run_id, attempt), "alone": not connections[DEFAULT_DB_ALIAS].in_atomic_block,
    }
    row = _execute(CLAIM_SQL, params)
    if row is None:
        return None
    runs_values, job_values = row[:len(RUN_FIELDS)], row[len(RUN_FIELDS):]
    run = _from_db(JobRun, runs_values)
    run.job = _from_db(Job, job_values)
    return run


def succeed(run_id, attempt, output, output_bytes, result, wanted_sql):
    """Move the run from running to succeeded (and its attempt with it) unless ``wanted_sql`` says
    a subscriber wants the event. Returns (moved, wanted): with ``wanted`` nothing was changed,
    and the caller records the success together with its event."""
    params = {
        "run_id": run_id, "attempt": attempt, "output": output, "output_bytes": output_bytes,
        # None is SQL NULL, as the ORM's update(result=None) stores it; anything else is JSON.
        "result": None if result is None else JobRun._meta.get_field("result").get_db_prep_value(result, connection),
    }
    moved, wanted = _execute(_succeed_sql(wanted_sql), params)
    return bool(moved), bool(wanted)


def release(now, batch):
    """Queue up to ``batch`` waiting runs of enabled jobs whose start time (``next_attempt_at``) is
    ``now`` or earlier, in one statement and its own commit: [(run id, attempt, job's queue, kind,
    timeout_seconds, priority, job id)]."""
    params = {"pending": RunStatus.PENDING, "queued": RunStatus.QUEUED, "now": now, "batch": batch}
    # Not prepared: run a few times a minute, and planned for the batch and the rows there are.
    return _execute(RELEASE_SQL, params, all_rows=True, prepare=False)


@functools.cache
def _succeed_sql(wanted_sql):
    return SUCCEED_SQL.replace("{wanted}", wanted_sql)


# Django opens its connections with prepare_threshold=None, which turns psycopg's preparation off
# altogether, prepare=True included. A threshold no query reaches keeps every other statement
# unprepared (as Django wants, for connection poolers) while prepare=True works for these two.
PREPARE_ONLY_WHEN_ASKED = 2**31 - 1


def _execute(sql, params, all_rows=False, prepare=True):
    """One statement in autocommit, its first row (``all_rows``: every row).

    Prepared on the server (unless JOBS_PREPARED_STATEMENTS is off, for a pooler in transaction
    mode): parsing and planning these statements cost more than running them. The worker skips
    Django's per-task health check (a SELECT 1 per run, see jobs.worker.signals); a connection the
    database dropped meanwhile fails here, is replaced, and the statement is sent once more. Safe
    to repeat: both statements are conditional, so one that did commit before its answer was
    lost changes nothing the second time."""
    db = connections[DEFAULT_DB_ALIAS]  # (each attribute of the ``connection`` proxy is a lookup)
    for retry in (True, False):
        try:
            db.ensure_connection()
            raw = db.connection
            prepare = prepare and settings.JOBS_PREPARED_STATEMENTS
            if prepare and raw.prepare_threshold is None:
                raw.prepare_threshold = PREPARE_ONLY_WHEN_ASKED
            # psycopg.Cursor binds on the server; the connection's default cursor (Django's
            # ClientCursor) would quietly ignore prepare=True.
            with db.wrap_database_errors, psycopg.Cursor(raw) as cursor:
                cursor.execute(sql, params, prepare=prepare)
                return cursor.fetchall() if all_rows else cursor.fetchone()
        except (OperationalError, InterfaceError):
            if not retry or db.in_atomic_block:
                raise
            db.close()


def _from_db(model, values):
    attnames, converters = _loading(model)
    converted = list(values)
    for i, field, field_converters in converters:
        for converter in field_converters:
            converted[i] = converter(converted[i], field, connection)
    return model.from_db(connection.alias, attnames, converted)


@functools.cache
def _loading(model):
    """The names of the fields the claim returns of ``model`` and, for those that have any, their
    converters from the database. (Cached by model: hashing the tuple of fields took longer.)"""
    fields = RUN_FIELDS if model is JobRun else JOB_FIELDS
    converters = [(i, f, c) for i, f in enumerate(fields) if (c := f.get_db_converters(connection))]
    # A set: Model.from_db asks each of the model's fields whether it is among them.
    return frozenset(f.attname for f in fields), converters
