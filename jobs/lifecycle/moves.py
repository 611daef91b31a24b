"""The state machine of a run and the one way a run moves along it: a conditional UPDATE.

``transition`` moves a run only if it is still in one of the statuses it is moved from (and at the
same attempt), so two processes can never both move a run; ``move_locked`` moves runs the caller
holds locked in one UPDATE. A move that ends a run records its end (``RunEnd``) in the same
transaction, for the figures (``rollup``), and moves its job's failure streak (``streaks``).
"""

from django.db import connection, transaction
from django.utils import timezone

from ..choices import ACTIVE_STATUSES, TERMINAL_STATUSES, RunStatus
from ..models import JobRun, RunEnd
from . import streaks

# The run state machine (docs/reference/run-states.md): each status and the statuses a run may
# reach it from. queued -> queued is a publish again; running -> queued a lost attempt run again;
# an end -> queued a rerun (runs.rerun: the run again as itself, at its next attempt).
# pending -> running, succeeded or failed: a check-in's run, made by its ping (jobs.lifecycle.pings).
MOVES = {
    RunStatus.QUEUED: frozenset({RunStatus.PENDING, RunStatus.RETRYING, RunStatus.QUEUED, RunStatus.RUNNING,
                                 *TERMINAL_STATUSES}),
    RunStatus.RUNNING: frozenset({RunStatus.QUEUED, RunStatus.PENDING}),
    RunStatus.RETRYING: frozenset({RunStatus.RUNNING}),
    RunStatus.SUCCEEDED: frozenset({RunStatus.RUNNING, RunStatus.PENDING}),
    RunStatus.FAILED: frozenset({RunStatus.RUNNING, RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.TIMED_OUT: frozenset({RunStatus.RUNNING}),
    RunStatus.LOST: frozenset({RunStatus.RUNNING}),
    RunStatus.SKIPPED: frozenset({RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.CANCELLED: ACTIVE_STATUSES,
}


def transition(run, to, *, frm, **fields):
    """Move ``run`` to ``to`` if it is still in one of ``frm`` (and at this attempt).

    The conditional UPDATE makes two processes unable to both move the same run; returns whether
    this one did. Only the moves of the state machine (``MOVES``) are possible.
    """
    if not set(frm) <= MOVES[to]:
        raise ValueError(f"a run cannot go from {', '.join(sorted(set(frm) - MOVES[to]))} to {to}")
    if to in TERMINAL_STATUSES:
        # The run ends: its end is recorded for the figures (RunEnd) in the same transaction.
        with transaction.atomic():
            updated = _move(run, to, frm, fields)
            if updated:
                RunEnd.record(run, to, fields.get("finished_at") or timezone.now())
                streaks.count_end(run, to)
    else:
        updated = _move(run, to, frm, fields)
    if updated:
        run.status = to
        for name, value in fields.items():
            setattr(run, name, value)
    return bool(updated)


def _move(run, to, frm, fields):
    return JobRun.objects.filter(pk=run.pk, status__of=list(frm), attempt=run.attempt).update(status=to, **fields)


def move_locked(runs, to, *, frm, **fields):
    """``transition`` for runs the caller holds locked (SELECT ... FOR UPDATE) in one of ``frm``:
    one UPDATE for them all, where a transition each costs an UPDATE a run. A move that does not
    end a run only. Without row locks (SQLite) each run moves by its own transition. Returns the
    runs moved."""
    if to in TERMINAL_STATUSES or not set(frm) <= MOVES[to]:
        raise ValueError(f"runs cannot be moved together from {', '.join(sorted(frm))} to {to}")
    if not connection.features.has_select_for_update:
        return [run for run in runs if transition(run, to, frm=frm, **fields)]
    assert all(run.status in frm for run in runs)
    JobRun.objects.filter(pk__in=[run.pk for run in runs]).update(status=to, **fields)
    for run in runs:
        run.status = to
        for name, value in fields.items():
            setattr(run, name, value)
    return runs
