"""Limits shared across jobs, with real workers: what ran when is read from the ledger the job
itself writes ("start <run>:<attempt> <time>", "end ..."), not from the service's records."""

import time

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, Limit, RunStatus

from .api_personas import make_personas
from .conftest import wait_for


def limited_job(name, key, path, seconds, **fields):
    return save_job(Job(name=name, kind="callable", target="test.ledger", limit_key=key,
                        kwargs={"path": path, "seconds": seconds}, **fields), {"type": "manual"})


def executions(ledger, killed_at=None):
    """(start, end) of each execution in the ledger; one that never ended (its worker was killed)
    ends at ``killed_at``."""
    starts = {attempt: float(at) for _, attempt, at in ledger.lines("start")}
    ends = {attempt: float(at) for _, attempt, at in ledger.lines("end")}
    return {attempt: (start, ends.get(attempt, killed_at)) for attempt, start in starts.items()}


def most_at_once(spans):
    """The most executions running at one moment; an end before a start at the same moment."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def all_finished(runs):
    return all(status in (RunStatus.SUCCEEDED,) for status in
               JobRun.objects.filter(pk__in=[run.pk for run in runs]).values_list("status", flat=True))


def test_twenty_runs_under_a_limit_of_three_never_run_more_than_three_at_once(processes, ledger):
    Limit.objects.create(key="warehouse", max_running=3)
    jobs = [limited_job(f"load-{n}", "warehouse", ledger.path, 0.4) for n in range(4)]
    processes.worker(concurrency=4, name="a")
    processes.worker(concurrency=4, name="b")
    processes.beat()

    runs = [lifecycle.create_run(jobs[n % 4]) for n in range(20)]
    wait_for(lambda: all_finished(runs), timeout=120, message="all 20 runs to succeed")

    spans = executions(ledger)
    assert len(spans) == 20  # each run executed once, and only once
    assert {attempt.split(":")[0] for attempt in spans} == {str(run.pk) for run in runs}
    assert most_at_once(spans.values()) <= 3
    # Eight worker processes and room for three: some waited, and the history says how long.
    assert JobRun.objects.filter(pk__in=[r.pk for r in runs], waited_seconds__gt=0).exists()
    assert not JobRun.objects.filter(pk__in=[r.pk for r in runs], waiting_since__isnull=False).exists()


def test_at_most_so_many_starts_a_minute(processes, ledger):
    Limit.objects.create(key="partner-api", max_running=10, max_starts_per_minute=3)
    job = limited_job("call-partner", "partner-api", ledger.path, 0.1)
    processes.worker(concurrency=4)
    processes.beat()

    runs = [lifecycle.create_run(job) for _ in range(4)]
    wait_for(lambda: all_finished(runs), timeout=150, message="the four runs to succeed")

    starts = sorted(start for start, _ in executions(ledger).values())
    assert len(starts) == 4
    # Within any 59 s (a second less than the limit's minute: a run's claim, timed by the database,
    # comes moments before the job writes its start) at most three starts.
    assert all(later - earlier >= 59 for earlier, later in zip(starts, starts[3:], strict=False))


def test_room_held_by_a_killed_worker_is_freed_once_the_loss_is_found(processes, ledger):
    people = make_personas()
    Limit.objects.create(key="solo", max_running=1)
    # The holder's queue is the doomed worker's alone until the holder has started there; the
    # survivor, started then, takes both queues (and so the holder's next attempt).
    holder = save_job(Job(name="holder", kind="callable", target="test.ledger_slow_first", limit_key="solo",
                          queue="doomed", owner=people.owner,
                          kwargs={"path": ledger.path, "first_seconds": 120, "seconds": 0.2}), {"type": "manual"})
    waiter = limited_job("waiter", "solo", ledger.path, 0.2, owner=people.owner)
    doomed = processes.worker(concurrency=1, name="doomed", queues="doomed")
    processes.beat()

    held = lifecycle.create_run(holder)
    wait_for(lambda: ledger.lines("start"), timeout=60, message="the holder to start on the doomed worker")
    processes.worker(concurrency=2, name="survivor", queues="jobs,doomed")
    waiting = lifecycle.create_run(waiter)

    def shown():
        answer = people.client(people.owner).get(f"/api/runs/{waiting.pk}/").json()
        return answer if answer["waiting_for"] else None

    answer = wait_for(shown, timeout=60, message="the waiting run to say what it waits for")
    assert answer["status"] == RunStatus.QUEUED
    assert answer["waiting_for"] == "waiting for solo (1 of 1 running)"
    assert not ledger.lines("end")  # the holder still runs

    processes.kill(doomed)
    killed_at = time.time()
    wait_for(lambda: all_finished([held, waiting]), timeout=90, message="both runs to succeed")

    held.refresh_from_db()
    waiting.refresh_from_db()
    assert held.lost_attempts == 1 and held.attempt == 2
    spans = executions(ledger, killed_at=killed_at)
    assert set(spans) == {f"{held.pk}:1", f"{held.pk}:2", f"{waiting.pk}:1"}
    assert most_at_once(spans.values()) <= 1
    assert waiting.waited_seconds > 0
