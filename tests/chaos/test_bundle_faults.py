"""Bundles (many short runs in one message) with real workers, on Redis and on RabbitMQ: a pool
process killed mid-bundle, a run that hangs to its timeout, a run cancelled while it waits its
turn, runs under a limit, a transactional function and the idempotency key, and beat dispatching a
crowded slot into bundles. The ledger (tests/jobfuncs.py) is written by the job code itself."""

import os
import signal
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import lifecycle
from jobs.execution import publishing
from jobs.lifecycle import bundling
from jobs.models import AttemptOutcome, Job, JobAttempt, JobRun, Limit, RunStatus

from ..conftest import wait_for
from .conftest import make_job, wait_for_leader
from .test_exactly_once import rows_by_run, rows_table  # noqa: F401 - the fixture

BROKERS = ("redis", "rabbitmq")
BUNDLED = {"JOBS_BUNDLE_MAX_RUNS": "50", "JOBS_BUNDLE_SHORT_SECONDS": "1"}  # a run's share: 2 s


def beat_leading(processes):
    """A beat that leads, before the test makes its runs: on its first tick as leader a beat takes over
    the runs queued for a recent slot (lifecycle.adopt_runs_ahead) and sends them again. Runs made a
    moment before went twice: once the keyed runs, in a second bundle beside the hang's, ended before
    the test could cancel one (a CI run)."""
    processes.beat(**BUNDLED)
    wait_for_leader(timeout=30)
    time.sleep(2)  # its first tick as leader, which adopts in the tick it takes the lease: a settling pause


def publish_together(*jobs_and_counts, bundle=False):
    """Runs of these jobs ((job, count) pairs), each on a slot of its own, published in one batch
    (as a slot's dispatch publishes them; ``bundle``: all in one bundle, whatever their jobs): [run
    ids] in their order."""
    now = timezone.now()
    rows = [(job, now + timedelta(milliseconds=i), RunStatus.QUEUED, "", None)
            for job, count in jobs_and_counts for i in range(count)]
    created = lifecycle.create_runs(rows, now)
    jobs = {job.pk: job for job, _ in jobs_and_counts}
    items = [(run_id, 1, jobs[job_id]) for run_id, job_id, *_ in created]
    if bundle:
        publishing.publish([bundling.bundle_of([lifecycle.message_for(*item) for item in items])])
    else:
        lifecycle.publish_many(items)
    return [run_id for run_id, *_ in created]


def all_ended(run_ids):
    return not JobRun.objects.filter(pk__in=run_ids, status__in=["queued", "running", "retrying", "pending"]).exists()


def starts(ledger):
    """{run id: [attempts the job code started]} from the ledger."""
    found = {}
    for row in ledger.lines("start"):
        run_id, attempt = map(int, row[1].split(":"))
        found.setdefault(run_id, []).append(attempt)
    return found


@pytest.mark.timeout(120)
@pytest.mark.brokers(*BROKERS)
def test_a_bundle_whose_pool_process_is_killed_keeps_what_it_recorded_and_runs_the_rest_once(processes, ledger):
    job = make_job("bundled", bundle="short", max_retries=0, kwargs={"path": ledger.path, "seconds": 0.4})
    processes.worker(concurrency=1, **BUNDLED)
    beat_leading(processes)
    run_ids = publish_together((job, 14))
    # Killed after 11 runs, 4.4 s: the runs waiting their turn so long outlived the lost window (4 beats
    # of 1 s) on the bundle's heartbeats, or they would have been lost and run again by now.
    wait_for(lambda: len(ledger.lines("end")) >= 11, message="eleven runs of the bundle to end")
    (pid,) = set(JobAttempt.objects.filter(run_id__in=run_ids, outcome=AttemptOutcome.RUNNING)
                 .values_list("pid", flat=True))
    recorded_before = set(JobRun.objects.filter(pk__in=run_ids, status=RunStatus.SUCCEEDED).values_list("pk", flat=True))
    os.kill(pid, signal.SIGKILL)

    wait_for(lambda: all_ended(run_ids), timeout=60, message="every run of the bundle to end")

    runs = {run.pk: run for run in JobRun.objects.filter(pk__in=run_ids)}
    assert {run.status for run in runs.values()} == {RunStatus.SUCCEEDED}
    bundle_ids = set(JobAttempt.objects.filter(run_id__in=run_ids, number=1).values_list("task_id", flat=True))
    assert len(bundle_ids) == 1 and bundle_ids.pop().startswith("bundle-")  # the first attempts shared a message
    started = starts(ledger)
    # What was recorded before the kill stays recorded: run once, at attempt 1.
    assert recorded_before and all(runs[run_id].attempt == 1 and started[run_id] == [1] for run_id in recorded_before)
    # The rest ran again once, lost at attempt 1 (its process died), never twice at one attempt; only
    # a run in flight at the kill (running, or done with its success not yet recorded) ran at attempt 1 too.
    rerun = [run_id for run_id in run_ids if runs[run_id].attempt == 2]
    assert rerun and all(started[run_id] in ([2], [1, 2]) for run_id in rerun)
    twice = [run_id for run_id in rerun if started[run_id] == [1, 2]]
    assert len(twice) <= 2, f"runs executed twice: {twice}"
    assert set(JobAttempt.objects.filter(run_id__in=rerun, number=1).values_list("outcome", flat=True)) == {"lost"}
    assert all(run_id in started for run_id in run_ids)


@pytest.mark.timeout(120)
@pytest.mark.brokers(*BROKERS)
def test_inside_a_bundle_each_run_keeps_its_timeout_key_limit_cancel_and_transaction(processes, ledger, rows_table):  # noqa: F811
    hangs = make_job("hangs", target="test.sleepy", bundle="short", max_retries=0, timeout_seconds=6,
                     kwargs={"path": ledger.path, "seconds": 60})
    keyed = make_job("keyed", target="test.keys", bundle="short", max_retries=0, kwargs={"path": ledger.path})
    Limit.objects.create(key="one-at-a-time", max_running=1)
    limited = make_job("limited", bundle="short", max_retries=0, limit_key="one-at-a-time",
                       kwargs={"path": ledger.path, "seconds": 0.5})
    rows = make_job("rows", target="test.insert_row_once", bundle="short", max_retries=0,
                    kwargs={"table": rows_table, "path": ledger.path, "seconds": 0})
    processes.worker(concurrency=2, **BUNDLED)
    beat_leading(processes)
    hang_id, *keyed_ids = publish_together((hangs, 1), (keyed, 5))
    cancelled_id = keyed_ids.pop()
    # Cancelled as soon as the bundle has claimed it, long before the hang's share (2 s) has passed
    # and the runs behind it are split off: cancelled after the hang had started, a loaded CI run
    # cancelled it once the split had already sent it on, and it ran.
    wait_for(lambda: JobRun.objects.get(pk=cancelled_id).status == RunStatus.RUNNING, message="the bundle's claim")
    claimed = JobRun.objects.get(pk=cancelled_id)
    assert claimed.started_at is None  # claimed, waiting its turn
    lifecycle.cancel(claimed)
    wait_for(lambda: any(row[1] == f"{hang_id}:1" for row in ledger.lines("start")), message="the hang to start")
    # The limit's runs in one bundle (as when the limit came after they were published: bundling
    # leaves a limited job's runs alone), and the transaction's as a bundle, while the hang goes on.
    limited_ids = publish_together((limited, 2), bundle=True)
    row_ids = publish_together((rows, 3))
    everything = [hang_id, cancelled_id, *keyed_ids, *limited_ids, *row_ids]

    wait_for(lambda: all_ended(everything), timeout=60, message="every run to end")

    runs = {run.pk: run for run in JobRun.objects.filter(pk__in=everything)}
    # The hang ran to its own timeout; the runs behind it were split off and did not wait for it.
    assert runs[hang_id].status == RunStatus.TIMED_OUT and runs[hang_id].started_at is not None
    assert all(runs[r].status == RunStatus.SUCCEEDED and runs[r].finished_at < runs[hang_id].finished_at
               for r in keyed_ids)
    # The run cancelled while waiting never ran; each other keyed run ran once, with its own key.
    assert runs[cancelled_id].status == RunStatus.CANCELLED
    keys = [row for row in ledger.lines("key")]
    assert sorted(int(row[3]) for row in keys) == sorted(keyed_ids)
    assert all(row[1] == runs[int(row[3])].idempotency_key for row in keys)
    # Under the limit of one, its runs never overlapped.
    spans = sorted((float(start[2]), float(end[2])) for start in ledger.lines("start") for end in ledger.lines("end")
                   if start[1] == end[1] and int(start[1].split(":")[0]) in limited_ids)
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]
    assert all(task_id.startswith("run-") for task_id in JobAttempt.objects.filter(run_id__in=limited_ids)
               .values_list("task_id", flat=True))  # claimed alone, through the limit
    # The transactional function: one row per run, committed with its success.
    assert {r: runs[r].status for r in [*limited_ids, *row_ids]} == dict.fromkeys([*limited_ids, *row_ids],
                                                                                  RunStatus.SUCCEEDED)
    assert rows_by_run() == {r: [1] for r in row_ids}
    task_ids = dict(JobAttempt.objects.filter(run_id__in=[*keyed_ids, *row_ids]).values_list("run_id", "task_id"))
    assert all(task_id.startswith("bundle-") for task_id in task_ids.values())


@pytest.mark.timeout(90)  # on Redis: the other tests publish bundles to RabbitMQ too
def test_beat_sends_a_crowded_slots_runs_to_the_workers_in_bundles(processes, ledger):
    slot = (timezone.now() + timedelta(seconds=4)).replace(microsecond=0)
    jobs = [make_job(f"crowd-{i}", bundle="short", kwargs={"path": ledger.path},
                     schedule={"type": "once", "run_at": slot.isoformat()}) for i in range(30)]
    processes.worker(concurrency=2, **BUNDLED)
    processes.beat(**BUNDLED)

    wait_for(lambda: JobRun.objects.filter(job__in=jobs, status=RunStatus.SUCCEEDED).count() == 30, timeout=60,
             message="the slot's 30 runs to succeed")

    runs = JobRun.objects.filter(job__in=jobs)
    assert {run.scheduled_for for run in runs} == {slot}
    assert sorted(int(row[1].split(":")[0]) for row in ledger.lines("end")) == sorted(run.pk for run in runs)
    attempts = JobAttempt.objects.filter(run__in=runs)
    assert {a.outcome for a in attempts} == {AttemptOutcome.SUCCEEDED} and attempts.count() == 30
    messages = {a.task_id for a in attempts}
    assert all(task_id.startswith("bundle-") for task_id in messages) and len(messages) < 30
    with connection.cursor() as cursor:  # each run its own row, with its worker and timings
        cursor.execute("SELECT count(*) FROM jobs_jobrun WHERE id = ANY(%s) AND worker <> '' "
                       "AND started_at <= finished_at", [[run.pk for run in runs]])
        assert cursor.fetchone()[0] == 30


@pytest.mark.timeout(120)
def test_new_jobs_of_a_crowded_slot_are_bundled_and_a_long_one_among_them_is_split_off(processes, ledger, tmp_path):
    # Twenty jobs with no history and the default bundle setting: taken for short. One is not: the
    # run that starts first takes 20 s. The 19 behind it go on elsewhere after its share (2 s), and end long
    # before it even on a loaded machine (with 8 s, one of them ended after it in a loaded CI run).
    processes.worker(concurrency=2, **BUNDLED)
    processes.beat(**BUNDLED)
    later = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    kwargs = {"path": ledger.path, "marker": str(tmp_path / "long"), "seconds": 20}
    jobs = [make_job(f"new-{i}", target="test.ledger_first_is_long", kwargs=kwargs,
                     schedule={"type": "once", "run_at": later.isoformat()}) for i in range(20)]
    assert {job.bundle for job in jobs} == {"auto"}
    # All on one slot a moment away, set at once: making twenty jobs took longer than a slot 4 s
    # away on a loaded CI machine, and beat dispatched those already made, each alone, as it came.
    slot = (timezone.now() + timedelta(seconds=2)).replace(microsecond=0)
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(next_run_at=slot)

    wait_for(lambda: JobRun.objects.filter(job__in=jobs, status=RunStatus.SUCCEEDED).count() == 20, timeout=60,
             message="the slot's 20 runs to succeed")

    started = {int(row[1].split(":")[0]): float(row[2]) for row in ledger.lines("start")}
    ended = {int(row[1].split(":")[0]): float(row[2]) for row in ledger.lines("end")}
    long_id = min(started, key=started.get)
    assert ended[long_id] - started[long_id] >= 20
    # The first attempts went in one message: the new jobs were bundled, the long one among them.
    runs = JobRun.objects.filter(job__in=jobs)
    assert JobAttempt.objects.get(run_id=long_id).task_id.startswith("bundle-")
    assert JobAttempt.objects.filter(run__in=runs).values("task_id").distinct().count() < 20
    # Every other run ended before the long one did: none waited for its end.
    assert sorted(started) == sorted(run.pk for run in runs)
    assert all(ended[run_id] < ended[long_id] for run_id in started if run_id != long_id)
