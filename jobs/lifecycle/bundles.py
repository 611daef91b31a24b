"""The worker's side of a bundle (many short runs in one message, jobs.worker.bundle), a statement
for many runs where a single run's message costs one each (jobs.lifecycle.postgres):

- ``claim_many``: the bundle's runs that are queued at their attempt, moved to running, with their
  attempt rows inserted, in one statement. A claimed run waits its turn ``running`` with no
  ``started_at`` (it has not started; the monitor's hard-timeout check leaves it to the worker's
  own time limit); its worker's heartbeat keeps it alive (``heartbeat_many``);
- ``succeed_many``: the successes of the runs done so far, in one statement, each started when the
  worker says it started (the claim's time on the database's clock plus the worker's own elapsed
  seconds, so no time compared across hosts comes from a worker's clock). A run whose success
  someone listens to (``events.wanted_sql``), or under a limit, is recorded the ordinary way;
- ``hand_back``: runs claimed but not started go back to queued at the same attempt, their attempt
  rows removed (they never ran), so another message can take them (a split-off);
- ``mark_started``: when a run turns out long (its share overrun) or fails, its start is written.

The same moves as ``attempts`` (a conditional UPDATE at the run's attempt, so an outcome that comes
after the attempt was declared lost or cancelled is refused); SQLite goes through the ORM.
"""

import json
from datetime import timedelta

from django.db import connection, transaction

from ..models import AttemptOutcome, JobAttempt, JobRun, RunStatus, RunTrigger
from ..timing import clock
from . import arrays, attempts, events, postgres, stored
from .moves import transition

RUN, JOB, ATTEMPT, END = postgres.RUN, postgres.JOB, postgres.ATTEMPT, postgres.END

CLAIM_MANY_SQL = f"""
WITH wanted AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) WITH ORDINALITY AS w(id, attempt, n)
), claimed AS (
    UPDATE {RUN} AS r
    SET status = '{RunStatus.RUNNING.value}', worker = %(worker)s, heartbeat_at = statement_timestamp(),
        started_at = NULL, finished_at = NULL
    FROM {JOB} AS j, wanted AS w
    WHERE r.id = w.id AND r.attempt = w.attempt AND r.status IS NOT DISTINCT FROM '{RunStatus.QUEUED.value}'
      -- The ids again, as the runs' own condition: on statistics that say the table is empty (a new
      -- deployment's first burst, before autovacuum has analysed the runs just made) PostgreSQL
      -- otherwise read every run for each of the bundle's ids (190 ms against 2 ms for 50 runs of 10,000).
      AND r.id = ANY(%(ids)s::bigint[])
      AND j.id = r.job_id
      -- as postgres.CLAIM_SQL: a run under a limit, or past its start deadline, is left to the single claim
      AND j.limit_key = '' AND r.waiting_since IS NULL
      AND NOT (r.trigger = '{RunTrigger.SCHEDULE.value}' AND r.attempt = 1 AND COALESCE(j.start_deadline_seconds, 0) > 0
               AND statement_timestamp() - r.scheduled_for > make_interval(secs => j.start_deadline_seconds))
    RETURNING w.n AS n, {", ".join(f'r."{c}" AS "{a}"' for c, a in postgres.RUN_COLUMNS)},
              {", ".join(f'j."{c}" AS "{a}"' for c, a in postgres.JOB_COLUMNS)}
), attempt AS (
    INSERT INTO {ATTEMPT} (run_id, number, outcome, task_id, worker, pid, started_at, finished_at, heartbeat_at,
                           error, traceback)
    SELECT "r__id", "r__attempt", '{AttemptOutcome.RUNNING.value}', %(task_id)s, %(worker)s, %(pid)s,
           statement_timestamp(), NULL, statement_timestamp(), '', ''
    FROM claimed
)
SELECT statement_timestamp(), claimed.* FROM claimed ORDER BY n
"""

# {wanted}: events.wanted_sql("succeeded"), a predicate over r and j.
SUCCEED_MANY_SQL = f"""
WITH done AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[], %(started)s::timestamptz[],
                         %(finished)s::timestamptz[], %(outputs)s::text[], %(sizes)s::bigint[], %(results)s::jsonb[])
                  AS d(id, attempt, started_at, finished_at, output, output_bytes, result)
), target AS (
    SELECT d.*, ({{wanted}}) AS wanted
    FROM done AS d JOIN {RUN} AS r ON r.id = d.id JOIN {JOB} AS j ON j.id = r.job_id
    WHERE r.attempt = d.attempt AND r.status IS NOT DISTINCT FROM '{RunStatus.RUNNING.value}'
), moved AS (
    UPDATE {RUN} AS r
    -- A success given its end (a check-in's ping, jobs.lifecycle.ping_batches) keeps the run's start.
    SET status = '{RunStatus.SUCCEEDED.value}',
        started_at = CASE WHEN t.finished_at IS NULL THEN LEAST(t.started_at, statement_timestamp()) ELSE r.started_at END,
        finished_at = COALESCE(t.finished_at, statement_timestamp()),
        output = t.output, output_bytes = t.output_bytes, result = t.result, error = ''
    FROM target AS t
    WHERE r.id = t.id AND NOT t.wanted AND r.attempt = t.attempt
      AND r.status IS NOT DISTINCT FROM '{RunStatus.RUNNING.value}'
    RETURNING r.id, r.attempt, r.job_id, r.started_at, r.finished_at
), finished AS (
    UPDATE {ATTEMPT} AS a
    SET outcome = '{AttemptOutcome.SUCCEEDED.value}', started_at = COALESCE(m.started_at, a.started_at),
        finished_at = m.finished_at,
        error = '', traceback = ''
    FROM moved AS m
    WHERE a.run_id = m.id AND a.number = m.attempt AND a.outcome = '{AttemptOutcome.RUNNING.value}'
), streak AS (
    -- streaks.count_end: a success ends the job's failure streak (written only when there was one)
    UPDATE {JOB} SET consecutive_failures = 0
    WHERE id IN (SELECT job_id FROM moved) AND consecutive_failures > 0
), ended AS (
    -- RunEnd.record: the end, for the figures of the pages (folded later by lifecycle.rollup)
    INSERT INTO {END} (run_id, job_id, status, ended_at, seconds)
    SELECT id, job_id, '{RunStatus.SUCCEEDED.value}', finished_at, EXTRACT(EPOCH FROM finished_at - started_at)
    FROM moved
)
SELECT 'moved', id FROM moved UNION ALL SELECT 'wanted', id FROM target WHERE wanted
"""


class Claimed:
    """A run a bundle claimed: the run (with its job), and when, on the database's clock."""

    __slots__ = ("run", "claimed_at")

    def __init__(self, run, claimed_at):
        self.run, self.claimed_at = run, claimed_at


def claim_many(runs, worker, pid, task_id):
    """Claim those of ``runs`` ((run id, attempt) pairs) that are queued at that attempt, in one
    statement; [Claimed] in the bundle's order. Runs under a limit, past their start deadline or
    already claimed are left out (the caller claims what is still queued the single way)."""
    if not runs:
        return []
    if connection.vendor != "postgresql":
        return _claim_by_orm(runs, worker, pid, task_id)
    params = {"ids": [r for r, _ in runs], "attempts": [a for _, a in runs], "worker": worker, "pid": pid,
              "task_id": task_id}
    claimed = []
    for row in postgres._execute(CLAIM_MANY_SQL, arrays.columns(params), all_rows=True, prepare=False):
        claimed_at, values = row[0], row[2:]
        run = postgres._from_db(postgres.JobRun, values[:len(postgres.RUN_FIELDS)])
        run.job = postgres._from_db(postgres.Job, values[len(postgres.RUN_FIELDS):])
        claimed.append(Claimed(run, claimed_at))
    return claimed


def _claim_by_orm(runs, worker, pid, task_id):
    claimed = []
    with transaction.atomic():
        now = clock.now()
        for run_id, attempt in runs:
            run = attempts._queued(run_id, attempt)
            if run is None or run.job.limit_key or run.waiting_since is not None:
                continue
            if attempts.past_start_deadline(run, now):
                continue
            if not transition(run, RunStatus.RUNNING, frm=[RunStatus.QUEUED], worker=worker,
                                       heartbeat_at=now, started_at=None, finished_at=None):
                continue
            JobAttempt.objects.create(run_id=run_id, number=attempt, task_id=task_id, worker=worker, pid=pid,
                                      started_at=now, heartbeat_at=now)
            claimed.append(Claimed(run, now))
    return claimed


class Success:
    """A run's success, waiting to be recorded with others (``succeed_many``)."""

    __slots__ = ("run_id", "attempt", "started_at", "output", "output_bytes", "result")

    def __init__(self, run_id, attempt, started_at, output, output_bytes, result):
        self.run_id, self.attempt, self.started_at = run_id, attempt, started_at
        self.output, self.output_bytes, self.result = stored.output(output), output_bytes, stored.result(result)


def started_at(claimed, elapsed_seconds):
    """When a claimed run started: its claim's time on the database's clock, plus the seconds the
    worker counted (on its monotonic clock) from the claim to the run's start."""
    return claimed.claimed_at + timedelta(seconds=max(elapsed_seconds, 0.0))


def succeed_many(successes):
    """Record ``successes`` (Success), in one statement on PostgreSQL; the (run id, attempt) pairs
    recorded. One that is no longer its attempt's (declared lost, cancelled) is refused, as
    ``attempts.record_success`` refuses it."""
    if not successes:
        return set()
    if connection.vendor != "postgresql":
        return _succeed_by_orm(successes)
    moved, wanted = succeed_unwanted(successes)
    recorded = {(s.run_id, s.attempt) for s in successes if s.run_id in moved}
    return recorded | _succeed_by_orm([s for s in successes if s.run_id in wanted])


def succeed_unwanted(successes, finished=None):
    """The successes nobody listens to, in one statement (PostgreSQL): (the run ids moved, the run ids
    left running because someone listens to their success, or they are under a limit). ``finished``:
    each success's end (None: now), a run given its end keeping its own start."""
    wanted_sql = events.wanted_sql("succeeded")
    wanted_sql = "TRUE" if wanted_sql is None else f"{wanted_sql} OR j.limit_key <> ''"
    result_field = JobRun._meta.get_field("result")
    params = {
        "ids": [s.run_id for s in successes], "attempts": [s.attempt for s in successes],
        "started": [s.started_at for s in successes], "finished": finished or [None] * len(successes),
        "outputs": [s.output for s in successes], "sizes": [s.output_bytes for s in successes],
        "results": [None if s.result is None else json.dumps(s.result, cls=result_field.encoder) for s in successes],
    }
    rows = postgres._execute(SUCCEED_MANY_SQL.replace("{wanted}", wanted_sql), arrays.columns(params), all_rows=True,
                             prepare=False)
    return ({run_id for what, run_id in rows if what == "moved"},
            {run_id for what, run_id in rows if what == "wanted"})


def _succeed_by_orm(successes):
    recorded = set()
    with transaction.atomic():
        for s in successes:
            mark_started(s.run_id, s.attempt, s.started_at)
            if attempts.succeed_by_orm(s.run_id, s.attempt, s.output, s.output_bytes, s.result):
                recorded.add((s.run_id, s.attempt))
    return recorded


def mark_started(run_id, attempt, moment):
    """Write when a claimed run started (its run and attempt rows), while it is still its attempt's."""
    if JobRun.objects.filter(pk=run_id, attempt=attempt, status__of=[RunStatus.RUNNING]).update(started_at=moment):
        JobAttempt.objects.filter(run_id=run_id, number=attempt).update(started_at=moment)


def hand_back(runs, task_id):
    """Put claimed runs that have not started ((run id, attempt) pairs) back in the queue at the same
    attempt, and remove their attempt rows: nothing of them ran. Returns the pairs handed back (a run
    cancelled or declared lost meanwhile stays as it is)."""
    back = []
    now = clock.now()
    for run_id, attempt in runs:
        with transaction.atomic():
            deleted, _ = JobAttempt.objects.filter(run_id=run_id, number=attempt, task_id=task_id,
                                                   outcome=AttemptOutcome.RUNNING).delete()
            if not deleted:
                continue
            if not transition(JobRun(pk=run_id, attempt=attempt), RunStatus.QUEUED, frm=[RunStatus.RUNNING],
                                       worker="", queued_at=now, started_at=None):
                transaction.set_rollback(True)  # it moved meanwhile: its attempt row stays
                continue
        back.append((run_id, attempt))
    return back


HEARTBEAT_MANY_SQL = f"""
WITH beaten AS (
    UPDATE {RUN} AS r SET heartbeat_at = statement_timestamp()
    FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS w(id, attempt)
    WHERE r.id = w.id AND r.attempt = w.attempt AND r.status IS NOT DISTINCT FROM '{RunStatus.RUNNING.value}'
    RETURNING r.id, r.attempt
), attempt AS (
    UPDATE {ATTEMPT} AS a SET heartbeat_at = statement_timestamp()
    FROM beaten AS b WHERE a.run_id = b.id AND a.number = b.attempt
)
SELECT id, attempt FROM beaten
"""


def heartbeat_many(runs):
    """Refresh the heartbeats of these claimed runs ((run id, attempt) pairs), in one statement on
    PostgreSQL; returns the pairs still theirs to run (the rest were cancelled or declared lost)."""
    if not runs:
        return set()
    if connection.vendor != "postgresql":
        return {(run_id, attempt) for run_id, attempt in runs if attempts.heartbeat(run_id, attempt)}
    rows = postgres._execute(HEARTBEAT_MANY_SQL, arrays.columns({"ids": [r for r, _ in runs],
                                                                 "attempts": [a for _, a in runs]}),
                             all_rows=True, prepare=False)
    return {(run_id, attempt) for run_id, attempt in rows}
