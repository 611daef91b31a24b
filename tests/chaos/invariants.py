"""What must hold after every chaos scenario, whatever the fault was.

- every slot of an interval job due between its first slot and a moment the test read from its
  clock has a run (the slots come from the clock, not from the runs that exist), which ended
  as it should, and whose effect happened exactly once (the ledger the test jobs write; the
  database's one-run-per-slot constraint already rules out two runs of a slot);
- every run reaches a terminal state within a stated bound;
- attempts numbered 1..run.attempt without gaps, at most one of them succeeded;
- no run executed twice at the same time, no attempt started twice (the ledger);
- every succeeded run's effect is in the ledger;
- duplicates counted, so the test asserts how many the fault forced (none, mostly).
"""

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jobs.models import AttemptOutcome, JobRun, RunStatus, RunTrigger

from ..conftest import wait_for


@dataclass
class Verdict:
    runs: int = 0
    succeeded: int = 0
    duplicate_executions: int = 0  # the same attempt ("<run id>:<attempt>" in the ledger) started more than once
    duplicate_effects: int = 0  # a run whose effect completed more than once (over all its attempts)
    reruns: int = 0  # runs the ledger saw start more than once (a later attempt after a lost one)
    problems: list = field(default_factory=list)

    @property
    def duplicates(self):
        return self.duplicate_executions + self.duplicate_effects


def wait_terminal(queryset, timeout):
    """Wait until every run of ``queryset`` is terminal; the bound is the scenario's promise."""
    wait_for(lambda: not queryset.exclude(status__in=_terminal()).exists(), timeout=timeout,
             # When it failed: the runs still active then (an f-string listed them as the wait began).
             message=lambda: f"every run terminal (still active: {_active(queryset)})")


def _terminal():
    return [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
            RunStatus.CANCELLED]


def _active(queryset):
    return list(queryset.exclude(status__in=_terminal()).values_list("pk", "status", "attempt")[:10])


def check(queryset, ledger=None, terminal_within=30, expect_succeeded=True):
    """Check the invariants over the runs of ``queryset``; raise AssertionError listing what broke.
    Returns the Verdict, whose duplicate counts the test asserts."""
    wait_terminal(queryset, terminal_within)
    runs = list(queryset.prefetch_related("attempts").order_by("pk"))
    verdict = Verdict(runs=len(runs))
    executions = _executions(ledger) if ledger else {}
    for run in runs:
        verdict.problems += _check_attempts(run)
        if run.status == RunStatus.SUCCEEDED:
            verdict.succeeded += 1
        elif expect_succeeded:
            verdict.problems.append(f"run {run.pk} ended {run.status}: {run.error[:200]}")
        if ledger is not None:
            _check_ledger(run, executions, verdict)
    assert not verdict.problems, "invariants broken:\n" + "\n".join(verdict.problems)
    return verdict


def _check_attempts(run):
    problems = []
    attempts = sorted(run.attempts.all(), key=lambda a: a.number)
    numbers = [a.number for a in attempts]
    started = run.status not in (RunStatus.SKIPPED, RunStatus.CANCELLED) or numbers
    if started and numbers != list(range(1, run.attempt + 1)):
        problems.append(f"run {run.pk} at attempt {run.attempt} has attempts {numbers}")
    won = [a.number for a in attempts if a.outcome == AttemptOutcome.SUCCEEDED]
    if len(won) > 1:
        problems.append(f"run {run.pk} has {len(won)} succeeded attempts")
    if run.status == RunStatus.SUCCEEDED and won != [run.attempt]:
        problems.append(f"run {run.pk} succeeded but its succeeded attempts are {won}")
    problems += [f"run {run.pk} attempt {a.number} still running" for a in attempts
                 if a.outcome == AttemptOutcome.RUNNING and run.is_terminal]
    return problems


def _executions(ledger):
    """{run id: [(key, start, end or None)]} from the ledger's start/end lines, in order."""
    opened = defaultdict(list)
    per_run = defaultdict(list)
    for kind, key, stamp in ledger.lines():
        moment = datetime.fromtimestamp(float(stamp), tz=UTC)
        if kind == "start":
            opened[key].append(len(per_run[key.split(":")[0]]))
            per_run[key.split(":")[0]].append([key, moment, None])
        elif kind == "end" and opened[key]:
            per_run[key.split(":")[0]][opened[key].pop(0)][2] = moment
    return per_run


def _check_ledger(run, executions, verdict):
    mine = executions.get(str(run.pk), [])
    keys = Counter(key for key, _, _ in mine)
    verdict.duplicate_executions += sum(n - 1 for n in keys.values())
    verdict.reruns += len(mine) > 1
    verdict.duplicate_effects += max(0, sum(1 for _, _, end in mine if end) - 1)
    if run.status == RunStatus.SUCCEEDED and not any(
        key == f"{run.pk}:{run.attempt}" and end for key, _, end in mine
    ):
        verdict.problems.append(f"run {run.pk} succeeded but its effect is not in the ledger")
    # An execution killed before its end line lasted, as far as the system knows, until its
    # attempt was declared over; a later attempt must not start before that.
    over_at = {f"{run.pk}:{a.number}": a.finished_at for a in run.attempts.all()}
    spans = sorted((start, end or over_at.get(key) or start, key) for key, start, end in mine)
    for (start_a, end_a, key_a), (start_b, _, key_b) in zip(spans, spans[1:], strict=False):
        if start_b < end_a:
            verdict.problems.append(f"run {run.pk}: {key_b} started at {start_b} while {key_a} "
                                    f"({start_a}..{end_a}) was still running")


# A slot due this long before the moment a test paused its job has surely been dispatched (the
# tick runs every 0.2 s in the tests' processes; the rest is margin for a loaded machine).
DISPATCH_MARGIN = timedelta(seconds=3)


@dataclass
class Slots:
    expected: int = 0  # slots due from the job's first slot to the test's moment
    seen: int = 0  # of those, the ones whose run ended as it should


def clock_slots(job, until):
    """The slots of the interval ``job`` from its first (``job.first_slot``, as saved) to ``until``."""
    every, slot, slots = timedelta(seconds=job.every_seconds), job.first_slot, []
    while slot <= until:
        slots.append(slot)
        slot += every
    return slots


def check_slots(job, paused_at, ledger, skipped_reason=None, terminal_within=60):
    """Every slot of the interval ``job`` due by ``paused_at`` (less the dispatch margin) has a run
    that succeeded, its effect once in the ledger, or (with ``skipped_reason``) one skipped for
    that reason; no run lies off the slots' grid. Waits first for every run of the job to end."""
    wait_terminal(job.runs.all(), terminal_within)
    expected = clock_slots(job, paused_at - DISPATCH_MARGIN)
    runs = {run.scheduled_for: run for run in job.runs.filter(trigger=RunTrigger.SCHEDULE)}
    effects = Counter(key.split(":")[0] for kind, key, _ in ledger.lines() if kind == "end")
    problems, report = [], Slots(expected=len(expected))
    for slot in expected:
        run = runs.get(slot)
        ran_once = run is not None and run.status == RunStatus.SUCCEEDED and effects[str(run.pk)] == 1
        skipped = (run is not None and run.status == RunStatus.SKIPPED and skipped_reason
                   and run.reason.startswith(skipped_reason))
        if run is None:
            problems.append(f"slot {slot} has no run")
        elif ran_once or skipped:
            report.seen += 1
        else:
            problems.append(f"slot {slot}: run {run.pk} ended {run.status} ({run.reason or run.error[:120]}), "
                            f"its effect {effects[str(run.pk)]} times")
    grid = set(clock_slots(job, max(runs, default=job.first_slot)))
    problems += [f"run {run.pk} at {slot} is off the slots' grid" for slot, run in runs.items() if slot not in grid]
    assert not problems, f"slot invariants broken ({len(expected)} slots due):\n" + "\n".join(problems)
    return report


def runs_of(*jobs):
    return JobRun.objects.filter(job__in=jobs)
