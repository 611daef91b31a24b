"""The nemesis's checker: after a quiet drain, the ledger the executions wrote (a file per host,
outside the service) and the database, against the slots the test's own clock expected.

- lost: slots due (from each job's first slot, by its schedule, up to the moment the test paused
  it) that have no run at all (a run skipped with a recorded reason is not lost: it is a decision
  the service wrote down);
- unfinished: runs (and workflow runs) still not ended after the drain;
- overlaps: two executions of different runs of a no-overlap job (``skip``) running at once;
- duplicate executions: executions of a run beyond the one that counted, not ended by a failure of
  the job itself: each blamed on the fault acting on its host while it ran, or unexplained;
- latency: for each fault, how late the runs whose slots fell within it started, against their slots.
"""

import re
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobs.models import JobAttempt, JobRun, RunStatus, RunTrigger

DISPATCH_MARGIN = timedelta(seconds=3)  # a slot due this long before the pause has surely been dispatched
TERMINAL = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
            RunStatus.CANCELLED}


@dataclass
class Execution:
    run: int
    attempt: int
    host: str
    start: float  # wall clock
    end: float | None = None
    outcome: str = ""  # "ok" or "fail" (on purpose, or its spool did not fit), "" when it never ended
    clock_offset: float = 0.0  # how far the host's clock was off when it started (read on the uptime)


def boot_time():
    """The wall clock (the test's, unskewed) at the kernel's uptime 0: what turns the ledger's uptime
    stamps into wall-clock times no host's skewed clock wrote."""
    with open("/proc/uptime") as uptime:
        return time.time() - float(uptime.read().split()[0])


def read_ledger(folder, boot=None):
    """Every execution in the ledger files of ``folder``, in order of start. ``boot``: the wall clock
    at uptime 0 (``boot_time()``): times are then read from the lines' uptime, which a host whose
    clock is skewed writes right; without it, from the lines' wall clock."""
    executions, open_ = [], defaultdict(list)
    for path in sorted(Path(folder).glob("ledger-*.txt")):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) < 6:
                continue  # a line cut short (the execution killed while writing)
            event, run, attempt, host, since_boot, written = parts[:6]
            wall = boot + float(since_boot) if boot is not None else float(written)
            key = (int(run), int(attempt), host)
            if event == "start":
                execution = Execution(int(run), int(attempt), host, wall, clock_offset=float(written) - wall)
                executions.append(execution)
                open_[key].append(execution)
            elif event == "end" and open_[key]:
                execution = open_[key].pop(0)
                execution.end, execution.outcome = wall, parts[6] if len(parts) > 6 else "ok"
    return sorted(executions, key=lambda e: e.start)


@dataclass
class Report:
    slots: int = 0
    lost: list = field(default_factory=list)
    unfinished: list = field(default_factory=list)
    overlaps: list = field(default_factory=list)
    frozen_overlaps: list = field(default_factory=list)  # overlaps of a frozen execution (see overlaps)
    duplicates: list = field(default_factory=list)  # (execution, fault or None)
    statuses: dict = field(default_factory=dict)
    executions: int = 0
    latency: list = field(default_factory=list)  # (fault, [seconds late])
    baseline: list = field(default_factory=list)  # seconds late of the runs no fault touched
    clock_offsets: dict = field(default_factory=dict)  # host: the largest offset of its clock seen, s
    spool_failures: int = 0  # executions that failed as their spool did not fit (a full disk)

    @property
    def unexplained(self):
        return [execution for execution, fault in self.duplicates if fault is None]

    @property
    def passed(self):
        return not (self.lost or self.unfinished or self.overlaps or self.unexplained)


def expected_slots(first_slot, every, until):
    slots, slot = [], first_slot
    while slot <= until:
        slots.append(slot)
        slot += every
    return slots


def check(plan, jobs, ledger_folder, faults, paused_at, faults_from):
    """``plan``: [(job or workflow, first slot, seconds between slots, no-overlap?)], from the test;
    ``jobs``: every job whose runs count (the workflow's steps too); ``faults_from``: when the nemesis
    began (wall clock): the latency counts the slots from then, not from the service's start."""
    from workflows.models import WorkflowRun

    report = Report()
    executions = read_ledger(ledger_folder, boot_time())
    report.executions = len(executions)
    by_run = defaultdict(list)
    for execution in executions:
        by_run[execution.run].append(execution)
    until = paused_at - DISPATCH_MARGIN
    for subject, first_slot, every, _ in plan:
        slots = expected_slots(first_slot, timedelta(seconds=every), until)
        report.slots += len(slots)
        if subject.runs.model is WorkflowRun:
            have = set(subject.runs.filter(trigger="schedule").values_list("scheduled_for", flat=True))
            report.unfinished += [f"workflow run {pk} ({status})" for pk, status in
                                  subject.runs.exclude(status__in=["succeeded", "failed", "cancelled"])
                                  .values_list("pk", "status")]
        else:
            have = set(subject.runs.filter(trigger=RunTrigger.SCHEDULE).values_list("scheduled_for", flat=True))
        report.lost += [f"{subject.name} slot {slot:%H:%M:%S}" for slot in slots if slot not in have]
    runs = list(JobRun.objects.filter(job__in=jobs).select_related("job"))
    for run in runs:
        report.statuses[run.status] = report.statuses.get(run.status, 0) + 1
        if run.status not in TERMINAL:
            report.unfinished.append(f"run {run.pk} of job {run.job_id} ({run.status}, attempt {run.attempt})")
    no_overlap = {s.pk for s, _, _, forbid in plan if forbid}
    attempts = JobAttempt.objects.filter(run__job__in=jobs).values_list("run_id", "number", "finished_at", "pid")
    finished_at = {(run, number): at for run, number, at, _ in attempts}
    pids = {(run, number): pid for run, number, _, pid in attempts}
    job_of = {run.pk: run.job_id for run in runs}
    for job_id in no_overlap:
        found, frozen = overlaps([e for e in executions if job_of.get(e.run) == job_id], finished_at,
                                 frozen_by(faults, pids))
        report.overlaps += found
        report.frozen_overlaps += frozen
    report.duplicates = duplicates(by_run, faults)
    for execution in executions:
        if abs(execution.clock_offset) > abs(report.clock_offsets.get(execution.host, 0.0)):
            report.clock_offsets[execution.host] = execution.clock_offset
    fails_on_purpose = {run.pk for run in runs if (run.job.kwargs or {}).get("fail_attempts")}
    report.spool_failures = sum(1 for e in executions if e.outcome == "fail" and e.run not in fails_on_purpose)
    report.latency, report.baseline = latency(runs, by_run, faults, faults_from)
    return report


def _end(execution, finished_at):
    """When an execution stopped: its end line, or (killed) when the service declared its attempt over."""
    if execution.end is not None:
        return execution.end
    declared = finished_at.get((execution.run, execution.attempt))
    return declared.timestamp() if declared else execution.start


def frozen_by(faults, pids):
    """A function telling the fault that froze an execution's own process (a SIGSTOP of the pool
    process that ran it) while it ran, or None. ``pids``: {(run, attempt): the pid that ran it}."""
    def fault_of(execution):
        end = execution.end if execution.end is not None else float("inf")
        for fault in faults:
            if fault.kind == "worker-child-stop" and fault.target == execution.host and fault.pid and \
                    fault.pid == pids.get((execution.run, execution.attempt)) and \
                    execution.start <= fault.started and fault.ended <= end:
                return fault
        return None
    return fault_of


def overlaps(executions, finished_at, frozen=lambda execution: None):
    """Two executions of different runs at once: (overlaps, overlaps of a frozen execution). An
    execution frozen mid-run (its process stopped) and declared over (lost) before the other began
    is a zombie once its process goes on: the service cannot stop what is frozen, and what it does
    after it thaws, before any check of its own can run, is the fault's (as a duplicate is)."""
    found, zombies = [], []
    spans = sorted((e.start, _end(e, finished_at), e) for e in executions)
    for i, (_, end, first) in enumerate(spans):
        for other_start, other_end, other in spans[i + 1:]:
            if other_start >= end:
                break
            if other.run != first.run:
                text = (f"run {first.run}#{first.attempt}@{first.host} and run {other.run}#{other.attempt}"
                        f"@{other.host} overlap {min(end, other_end) - other_start:.1f} s")
                declared = finished_at.get((first.run, first.attempt))
                fault = frozen(first)
                if fault and declared and declared.timestamp() <= other_start:
                    zombies.append(f"{text}: run {first.run}#{first.attempt} frozen by fault {fault.number} "
                                   f"and declared over before the other began; it went on "
                                   f"{end - fault.ended:.1f} s after its process was continued")
                else:
                    found.append(text)
    return found, zombies


def duplicates(by_run, faults):
    """Executions beyond the last of each run that did not end in a failure of the job's own (those
    are retries): each with the fault acting on its host while it ran (None: unexplained)."""
    found = []
    for run_executions in by_run.values():
        for execution in run_executions[:-1]:
            if execution.outcome == "fail":
                continue
            found.append((execution, blame(execution, faults)))
    return found


def blame(execution, faults):
    end = execution.end if execution.end is not None else float("inf")
    for fault in faults:
        if fault.on_host and fault.target == execution.host and fault.started - 1 <= end and \
                execution.start <= fault.ended + 1:
            return fault
    return None


def latency(runs, by_run, faults, since):
    """For each fault, how late (seconds, from the slot) the executions that counted started, of the
    scheduled runs whose slot fell between the fault's start and 20 s after its end; and the same for
    the runs no fault touched (the baseline)."""
    lateness, names = {}, {}
    for run in runs:
        if run.trigger != RunTrigger.SCHEDULE or not by_run.get(run.pk) or run.scheduled_for.timestamp() < since:
            continue
        slot = run.scheduled_for.timestamp()
        lateness[slot, run.pk] = by_run[run.pk][-1].start - slot
        names[run.pk] = run.job.name
    per_fault, touched = [], set()
    for fault in faults:
        mine = [(key, late) for key, late in lateness.items() if fault.started <= key[0] <= fault.ended + 20]
        touched |= {key for key, _ in mine}
        per_fault.append((fault, [late for _, late in mine]))
    baseline = sorted(((late, f"{names[key[1]]} run {key[1]} at {stamp(key[0])}") for key, late in lateness.items()
                       if key not in touched), key=lambda item: item[0])
    return per_fault, baseline


EXCEPTION = re.compile(r"^([\w.]+(?:Error|Exception|Exceeded|Lost)): ?(.{0,100})")


def errors_in_logs(paths):
    """{exception and the start of its message: how many times} over the processes' logs: what
    the faults made the service log (a cause to look at when one never goes away)."""
    found = Counter()
    for path in paths:
        for line in Path(path).read_text(errors="replace").splitlines():
            if match := EXCEPTION.match(line):
                found[f"{match.group(1)}: {re.sub(r'[0-9]+', 'N', match.group(2))}"] += 1
    return found


def percentiles(values):
    if not values:
        return "-", "-", "-"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(ordered):.1f}", f"{p99:.1f}", f"{ordered[-1]:.1f}"


def stamp(seconds):
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%H:%M:%S")


def render(report, faults, setup, seed, seconds, command, began, errors=None):
    """The report as Markdown: the summary table, the latency by fault kind, the faults."""
    lines = [f"### {setup}: {seconds} s, seed {seed}", "",
             f"Repeat: `{command}`", "",
             "| check | result | goal |", "|---|---|---|",
             f"| slots due (the test's clock) | {report.slots} | |",
             f"| lost (slots without a run) | {len(report.lost)} | 0 |",
             f"| unfinished runs | {len(report.unfinished)} | 0 |",
             f"| overlaps of a `skip` (forbid) job | {len(report.overlaps)} | 0 |",
             f"| ... of an execution frozen and declared lost, after its process was continued | "
             f"{len(report.frozen_overlaps)} | each by a SIGSTOP of its process |",
             f"| duplicate executions | {len(report.duplicates)} | each explained by a fault |",
             f"| ... unexplained | {len(report.unexplained)} | 0 |",
             f"| executions in the ledger | {report.executions} | |",
             f"| faults | {len(faults)} | |",
             f"| executions failed on a full disk (their spool) | {report.spool_failures} | |",
             f"| largest clock offset seen, by host (s) | "
             f"{', '.join(f'{h} {o:+.0f}' for h, o in sorted(report.clock_offsets.items())) or '-'} | |",
             f"| runs by status | {', '.join(f'{k} {v}' for k, v in sorted(report.statuses.items()))} | |",
             f"| verdict | {'PASS' if report.passed else 'FAIL'} | |", ""]
    kinds = defaultdict(lambda: ([], []))
    for fault, late in report.latency:
        kinds[fault.kind][0].append(fault)
        kinds[fault.kind][1].extend(late)
    blamed = defaultdict(int)
    for _, fault in report.duplicates:
        blamed[fault.kind if fault else "unexplained"] += 1
    lines += ["| fault | times | runs touched | late p50 s | late p99 s | late max s | duplicates blamed |",
              "|---|---|---|---|---|---|---|"]
    for kind, (kind_faults, late) in sorted(kinds.items()):
        lines.append(f"| {kind} | {len(kind_faults)} | {len(late)} | {' | '.join(percentiles(late))} | "
                     f"{blamed.get(kind, 0)} |")
    baseline = [late for late, _ in report.baseline]
    lines.append(f"| (no fault) | - | {len(baseline)} | {' | '.join(percentiles(baseline))} | "
                 f"{blamed.get('unexplained', 0)} unexplained |")
    lines += ["", "Latest runs no fault touched: " + "; ".join(f"{what} {late:.1f} s late"
                                                                for late, what in report.baseline[-3:])]
    lines += ["", "<details><summary>The faults</summary>", "", "| # | at (s) | UTC | fault | target | lasted s | what |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {f.number} | {f.started - began:.0f} | {stamp(f.started)} | {f.kind} | {f.target} | "
              f"{f.ended - f.started:.1f} | {f.detail} |" for f in faults]
    lines += ["", "</details>", ""]
    if errors:
        lines += ["<details><summary>Exceptions in the processes' logs</summary>", "", "| times | exception |",
                  "|---|---|", *[f"| {n} | `{text}` |" for text, n in errors.most_common(15)], "", "</details>", ""]
    for title, items in (("Lost", report.lost), ("Unfinished", report.unfinished), ("Overlaps", report.overlaps),
                         ("Overlaps of a frozen execution", report.frozen_overlaps),
                         ("Unexplained duplicates", [f"run {e.run}#{e.attempt}@{e.host} {stamp(e.start)}"
                                                     for e in report.unexplained])):
        if items:
            lines += [f"{title}:", "", *[f"- {item}" for item in items[:30]], ""]
    return "\n".join(lines)
