"""The queued pings of a batch (jobs.lifecycle.ping_queue) recorded together, in a few statements
for them all where ``pings.record_ping`` spends some twenty-five a ping.

The pings are taken in rounds, the first of each job's pings in the batch, then the second, and so on,
so that the pings of one job are recorded in the order they came. In a round, with the jobs locked:

- a success (or exit status 0) of a job with a run running ends that run;
- a success of a job with none, whose slot has no run yet, makes the slot's run and ends it (no
  slot: a run of its own, as ``record_ping`` makes);
- a start of a job with no run running, whose slot has no run yet, makes the slot's run, running;

each kind a statement for the round (the runs made by ``runs.create_runs``, started with their
attempts by one statement; the successes by ``bundles.succeed_unwanted``, the worker's own). Every
other ping (a failure, a slot that has its run, a success someone listens to: an event to send)
is recorded by ``record_ping``, as it would have been alone. The result is the same as each ping
recorded by ``record_ping`` in turn (tests/test_ping_queue.py compares them).
"""

from collections import defaultdict

from django.db import connection
from django.db.models import OuterRef, Subquery

from ..models import AttemptOutcome, Job, JobRun, RunStatus, RunTrigger
from . import arrays, bundles, pings, postgres
from .moves import MOVES
from .runs import create_runs

RUN, JOB, ATTEMPT = postgres.RUN, postgres.JOB, postgres.ATTEMPT

# The runs just made, running, with their attempts.
START_MANY_SQL = f"""
WITH d AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(started)s::timestamptz[], %(outputs)s::text[], %(sizes)s::bigint[],
                         %(created)s::timestamptz[], %(pinged)s::timestamptz[], %(workers)s::text[])
                  AS d(id, started_at, output, output_bytes, created_at, pinged_at, worker)
), started AS (
    UPDATE {RUN} AS r SET status = '{RunStatus.RUNNING.value}', started_at = d.started_at, reason = '',
                          output = d.output, output_bytes = d.output_bytes, created_at = d.created_at
    FROM d WHERE r.id = d.id AND r.status = '{RunStatus.PENDING.value}'
    RETURNING r.id, r.attempt
)
INSERT INTO {ATTEMPT} (run_id, number, outcome, task_id, worker, pid, started_at, finished_at, heartbeat_at,
                       error, traceback)
SELECT s.id, s.attempt, '{AttemptOutcome.RUNNING.value}', '', d.worker, NULL, d.pinged_at, NULL, NULL, '', ''
FROM started AS s JOIN d ON d.id = s.id
"""
LAST_RUN_SQL = f"""
UPDATE {JOB} AS j SET last_run_id = d.run_id
FROM unnest(%(jobs)s::bigint[], %(runs)s::bigint[]) AS d(job_id, run_id)
WHERE j.id = d.job_id AND (j.last_run_id IS NULL OR j.last_run_id < d.run_id)
"""
assert RunStatus.PENDING in MOVES[RunStatus.RUNNING]


def record_many(pinged):
    """Record ``pinged`` ((job id, Ping, when) triples, oldest first) in the caller's transaction."""
    if connection.vendor != "postgresql":
        for job_id, ping, at in pinged:
            pings.record_ping(job_id, ping, now=at)
        return
    rounds = defaultdict(list)
    seen = defaultdict(int)
    for job_id, ping, at in pinged:
        rounds[seen[job_id]].append((job_id, ping, at))
        seen[job_id] += 1
    for number in sorted(rounds):
        _record_round(rounds[number])


def _record_round(pinged):
    """One ping of each job."""
    jobs = _locked([job_id for job_id, _, _ in pinged])
    running = JobRun.objects.in_bulk([job.running_id for job in jobs.values() if job.running_id])
    for run in running.values():
        run.job = jobs[run.job_id]
    pinged = [(jobs[job_id], ping, at) for job_id, ping, at in pinged if job_id in jobs]  # a job gone: nothing
    # As record_ping: a start goes by its slot, a success ends the run running or goes by its slot.
    slots = {job.pk: pings.slot_of(job, at, job.last_slot) for job, ping, at in pinged
             if ping.kind == pings.START or (ping.kind == pings.SUCCESS and not job.running_id)}
    taken = _runs_at([(job_id, slot) for job_id, slot in slots.items() if slot is not None])
    ends, makes, alone = [], [], []
    for job, ping, at in pinged:
        if ping.kind == pings.SUCCESS and job.running_id:
            ends.append((running[job.running_id], ping, at))
        elif job.pk in slots and (slots[job.pk] is None or (job.pk, slots[job.pk]) not in taken):
            makes.append((job, ping, at, slots[job.pk]))  # the slot's run (no slot: a run of its own)
        else:
            alone.append((job, ping, at))
    made = _make_runs(makes, alone)
    _end_successes(ends, [(run_id, job, ping, at) for run_id, job, ping, at in made if ping.kind == pings.SUCCESS])
    for job, ping, at in alone:
        pings.record_ping(job.pk, ping, now=at)


def _locked(job_ids):
    """The jobs, locked, each with the id of its latest run running and its last slot with a run."""
    running = JobRun.objects.filter(job=OuterRef("pk"), status=RunStatus.RUNNING).order_by("-started_at")
    last = JobRun.objects.filter(job=OuterRef("pk"), trigger=RunTrigger.SCHEDULE).order_by("-scheduled_for")
    jobs = (Job.objects.select_for_update(of=("self",)).select_related("crontab", "interval", "clocked")
            .filter(pk__in=job_ids).order_by("pk")
            .annotate(running_id=Subquery(running.values("pk")[:1]), last_slot=Subquery(last.values("scheduled_for")[:1])))
    return {job.pk: job for job in jobs}


def _runs_at(pairs):
    """Which of the (job id, slot) pairs have a run."""
    if not pairs:
        return set()
    rows = postgres._execute(
        f"SELECT job_id, scheduled_for FROM {RUN} WHERE (job_id, scheduled_for) IN "
        "(SELECT * FROM unnest(%(jobs)s::bigint[], %(slots)s::timestamptz[]))",
        arrays.columns({"jobs": [job_id for job_id, _ in pairs], "slots": [slot for _, slot in pairs]}), all_rows=True,
        prepare=False)
    return {(job_id, slot) for job_id, slot in rows}


def _make_runs(makes, alone):
    """Make the runs of ``makes`` (job, ping, when, slot), running; [(run id, job, ping, when)]. A ping
    whose run could not be made (another run holds that instant) goes to ``alone``."""
    made_for = {}
    for trigger in (RunTrigger.SCHEDULE, RunTrigger.PING):
        rows = [(job, slot if slot is not None else at, RunStatus.PENDING, "", None)
                for job, ping, at, slot in makes if (slot is not None) == (trigger == RunTrigger.SCHEDULE)]
        for run_id, job_id, _, _ in create_runs(rows, min(at for _, _, at, _ in makes), trigger=trigger) if rows else []:
            made_for[job_id] = run_id
    made = [(made_for[job.pk], job, ping, at) for job, ping, at, _ in makes if job.pk in made_for]
    alone += [(job, ping, at) for job, ping, at, _ in makes if job.pk not in made_for]
    if not made:
        return []
    starts = [ping.kind == pings.START for _, _, ping, _ in made]
    _update(START_MANY_SQL, {
        "ids": [run_id for run_id, _, _, _ in made],
        # A success with no start has no start of its own (as record_ping leaves it).
        "started": [at if start else None for (_, _, _, at), start in zip(made, starts, strict=True)],
        "outputs": [ping.output if start else "" for (_, _, ping, _), start in zip(made, starts, strict=True)],
        "sizes": [ping.output_bytes if start else 0 for (_, _, ping, _), start in zip(made, starts, strict=True)],
        "created": [at for _, _, _, at in made],  # made when its ping came, as record_ping makes it
        "pinged": [at for _, _, _, at in made],
        "workers": [f"ping from {ping.address or '?'}"[:255] for _, _, ping, _ in made],
    })
    _update(LAST_RUN_SQL, {"jobs": [job.pk for _, job, _, _ in made], "runs": [run_id for run_id, _, _, _ in made]})
    return made


def _update(sql, params):
    with connection.cursor() as cursor:
        cursor.execute(sql, arrays.columns(params))


def _end_successes(ends, made):
    """End as successes at their pings' times the runs of ``ends`` (run, ping, when) and of ``made``
    (run id, job, ping, when; made running by ``_make_runs``, with no output or start of their own):
    in one statement those whose success nobody listens to, the others as record_ping ends them
    (their events sent)."""
    if not ends and not made:
        return
    successes = [bundles.Success(run.pk, run.attempt, run.started_at or at,
                                 ping.output if ping.output or not run.output else run.output,
                                 ping.output_bytes if ping.output or not run.output else run.output_bytes,
                                 _result(ping, run.result)) for run, ping, at in ends]
    successes += [bundles.Success(run_id, 1, at, ping.output, ping.output_bytes, _result(ping, None))
                  for run_id, _, ping, at in made]
    finished = [at for _, _, at in ends] + [at for _, _, _, at in made]
    _, listened = bundles.succeed_unwanted(successes, finished=finished)
    if not listened:
        return
    runs = JobRun.objects.in_bulk([run_id for run_id, _, _, _ in made if run_id in listened])
    for run_id, job, _, _ in made:
        if run_id in runs:
            runs[run_id].job = job
    for run, ping, at in [*ends, *((runs[run_id], ping, at) for run_id, _, ping, at in made if run_id in runs)]:
        if run.pk in listened:
            pings.end_run(run, ping, at)


def _result(ping, result):
    return {"exit_status": ping.exit_status} if ping.exit_status is not None else result
