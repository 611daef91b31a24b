"""Workflows run by real Celery workers (and beat, for the monitor) against the real database and
Redis: the diamond A → (B, C) → D, a failing B and its re-run, two upstreams finishing together,
and a worker SIGKILLed in the middle of a workflow."""

import re

import pytest

from jobs.models import Job, JobRun
from workflows import progress
from workflows.models import WorkflowRun, WorkflowRunStatus

from .conftest import wait_for
from .workflow_helpers import make_job, make_workflow

DIAMOND = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def finished(wf_run, timeout=60):
    def done():
        wf_run.refresh_from_db()
        return wf_run.is_terminal

    wait_for(done, timeout=timeout, message=f"workflow run #{wf_run.pk} to end")
    return wf_run


def steps(wf_run):
    return {s.job.name: s.status for s in wf_run.steps.select_related("job")}


def keys_of(ledger, event, job_name):
    """Attempts ("run:attempt") of the ledger lines of ``event`` written by runs of the job."""
    run_ids = {str(pk) for pk in JobRun.objects.filter(job__name=job_name).values_list("pk", flat=True)}
    return [row[1] for row in ledger.lines(event) if row[1].split(":")[0] in run_ids]


def times_of(ledger, event, job_name):
    run_ids = {str(pk) for pk in JobRun.objects.filter(job__name=job_name).values_list("pk", flat=True)}
    return [float(row[2]) for row in ledger.lines(event) if row[1].split(":")[0] in run_ids]


@pytest.mark.timeout(90)
def test_a_diamond_runs_d_once_after_b_and_c(processes, ledger):
    for name in "abcd":
        make_job(name, kwargs={"path": ledger.path, "seconds": 0.3})
    workflow = make_workflow("diamond", "abcd", DIAMOND)
    processes.worker(concurrency=2, name="wa")
    processes.worker(concurrency=2, name="wb")

    wf_run = finished(progress.start(workflow))

    assert wf_run.status == WorkflowRunStatus.SUCCEEDED
    assert steps(wf_run) == dict.fromkeys("abcd", "succeeded")
    assert len(keys_of(ledger, "start", "d")) == 1
    assert Job.objects.get(name="d").last_run_id == wf_run.steps.get(job__name="d").run_id
    assert times_of(ledger, "start", "d")[0] >= max(times_of(ledger, "end", "b") + times_of(ledger, "end", "c"))
    assert min(times_of(ledger, "start", "b") + times_of(ledger, "start", "c")) >= times_of(ledger, "end", "a")[0]


@pytest.mark.timeout(90)
def test_a_failing_b_skips_d_and_a_rerun_from_b_completes_the_workflow(processes, ledger, tmp_path):
    marker = tmp_path / "b-is-broken"
    marker.touch()
    for name in "acd":
        make_job(name, kwargs={"path": ledger.path})
    make_job("b", target="test.fail_while", kwargs={"marker": str(marker), "path": ledger.path})
    workflow = make_workflow("diamond", "abcd", DIAMOND)
    processes.worker(concurrency=2)

    first = finished(progress.start(workflow))

    assert first.status == WorkflowRunStatus.FAILED
    assert steps(first) == {"a": "succeeded", "b": "failed", "c": "succeeded", "d": "skipped"}
    assert first.steps.get(job__name="d").reason == "upstream b failed"
    assert keys_of(ledger, "start", "d") == []

    marker.unlink()
    second = finished(progress.rerun(first))

    assert second.status == WorkflowRunStatus.SUCCEEDED
    assert second.rerun_of_id == first.pk
    assert steps(second) == dict.fromkeys("abcd", "succeeded")
    assert {s.job.name for s in second.steps.filter(kept=True).select_related("job")} == {"a", "c"}
    assert len(keys_of(ledger, "start", "a")) == 1  # kept, not run again
    assert len(keys_of(ledger, "start", "b")) == 2
    assert len(keys_of(ledger, "start", "d")) == 1


REPETITIONS = 8


@pytest.mark.timeout(240)
def test_two_upstreams_finishing_together_on_two_workers_start_d_once(processes, ledger):
    make_job("a", kwargs={"path": ledger.path})
    make_job("b", target="test.barrier", kwargs={"path": ledger.path, "tag": "-"})
    make_job("c", target="test.barrier", kwargs={"path": ledger.path, "tag": "-"})
    make_job("d", kwargs={"path": ledger.path})
    workflow = make_workflow("diamond", "abcd", DIAMOND)
    processes.worker(concurrency=2, name="wa")
    processes.worker(concurrency=2, name="wb")

    for i in range(REPETITIONS):
        # A barrier of its own for each repetition: B and C wait for each other, then end together.
        Job.objects.filter(name__in=["b", "c"]).update(kwargs={"path": ledger.path, "tag": str(i)})
        wf_run = finished(progress.start(workflow))
        assert wf_run.status == WorkflowRunStatus.SUCCEEDED, steps(wf_run)
        assert wf_run.steps.get(job__name="d").run.status == "succeeded"

    assert JobRun.objects.filter(job__name="d").count() == REPETITIONS
    assert len(keys_of(ledger, "start", "d")) == REPETITIONS
    assert len(keys_of(ledger, "end", "b")) == len(keys_of(ledger, "end", "c")) == REPETITIONS
    workers = set(JobRun.objects.filter(job__name__in=["b", "c"]).values_list("worker", flat=True))
    assert len(workers) == 2, "B and C ran on one worker only, so nothing was concurrent"


@pytest.mark.timeout(120)
def test_a_worker_killed_in_the_middle_of_a_workflow_delays_it_and_loses_nothing(processes, ledger):
    import signal

    make_job("a", kwargs={"path": ledger.path})
    make_job("b", kwargs={"path": ledger.path, "seconds": 3}, max_retries=1, retry_backoff_seconds=0.2,
             retry_jitter=False)
    make_job("c", kwargs={"path": ledger.path, "seconds": 0.5})
    make_job("d", kwargs={"path": ledger.path})
    workflow = make_workflow("diamond", "abcd", DIAMOND)
    workers = {"wa": processes.worker(concurrency=1, name="wa"), "wb": processes.worker(concurrency=1, name="wb")}
    processes.beat()

    wf_run = progress.start(workflow)

    def b_started():
        step = wf_run.steps.select_related("run").get(job__name="b")
        return step.run if step.run and step.run.worker and keys_of(ledger, "start", "b") else None

    b_run = wait_for(b_started, timeout=30, message="b to start")
    victim = b_run.worker.split("@")[0]
    processes.kill(workers[victim], signal.SIGKILL, group=True)

    finished(wf_run, timeout=90)
    assert wf_run.status == WorkflowRunStatus.SUCCEEDED, steps(wf_run)
    b_run.refresh_from_db()
    assert b_run.attempt == 2
    assert list(b_run.attempts.order_by("number").values_list("outcome", flat=True)) == ["lost", "succeeded"]
    for name in "abcd":
        assert JobRun.objects.filter(job__name=name).count() == 1, name
    assert len(keys_of(ledger, "start", "d")) == 1
    assert WorkflowRun.objects.count() == 1


@pytest.mark.timeout(90)
def test_a_scheduled_workflow_runs_once_per_slot_with_two_schedulers(processes, ledger):
    make_job("a", kwargs={"path": ledger.path})
    make_job("b", kwargs={"path": ledger.path})
    workflow = make_workflow("every-2s", "ab", [("a", "b")], schedule={"type": "interval", "every_seconds": 2})
    processes.worker(concurrency=2)
    processes.beat(name="beat-1")
    processes.beat(name="beat-2")

    def two_done():
        done = workflow.runs.filter(status=WorkflowRunStatus.SUCCEEDED)
        return done.count() >= 2 and list(done)

    wait_for(two_done, timeout=60, message="two scheduled workflow runs to succeed")
    scheduled = list(workflow.runs.values_list("trigger", "scheduled_for"))
    assert {trigger for trigger, _ in scheduled} == {"schedule"}
    assert len({slot for _, slot in scheduled}) == len(scheduled)
    for wf_run in workflow.runs.filter(status=WorkflowRunStatus.SUCCEEDED):
        assert wf_run.steps.filter(status="succeeded").count() == 2


BAR = re.compile(r'<rect class="bar[^"]*" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="\d+">'
                 r"<title>([^<]*)</title>")
LANE = re.compile(r'<text class="lane"[^>]*>([^<]*)</text>')


def bars(html):
    """The bars a timeline draws: {title's subject (before ":"): (left, right, title)}."""
    return {title.split(":")[0]: (float(x), float(x) + float(w), title) for x, _, w, title in BAR.findall(html)}


@pytest.mark.timeout(120)
def test_the_workflow_page_draws_its_steps_along_time_and_the_workers_page_their_processes(
        processes, ledger, client, people):
    for name in "abcd":
        make_job(name, target="test.ledger_pid", kwargs={"path": ledger.path, "seconds": 0.5}, owner=people.owner)
    workflow = make_workflow("timeline", "abcd", DIAMOND, owner=people.owner)
    processes.worker(concurrency=2, name="wt")
    wf_run = finished(progress.start(workflow))
    assert wf_run.status == WorkflowRunStatus.SUCCEEDED

    client.force_login(people.owner)
    gantt = client.get(f"/workflows/{workflow.pk}/?run={wf_run.pk}").content.decode()
    gantt = gantt[gantt.index('id="gantt"'):]
    drawn = bars(gantt[:gantt.index("</svg>")])
    assert set(drawn) == set("abcd")
    # The ledger's order, as the chart draws it: b and c after a, d after both (a pixel of rounding).
    assert min(times_of(ledger, "start", "b") + times_of(ledger, "start", "c")) >= times_of(ledger, "end", "a")[0]
    assert min(drawn["b"][0], drawn["c"][0]) >= drawn["a"][1] - 1
    assert drawn["d"][0] >= max(drawn["b"][1], drawn["c"][1]) - 1

    # One lane per pool process that ran an attempt, by the PIDs the job function itself wrote.
    pids = {row[3] for row in ledger.lines("start")}
    runs = {row[1].split(":")[0] for row in ledger.lines("start")}
    timeline = client.get("/workers/?hours=1").content.decode()
    lanes = LANE.findall(timeline)
    assert {lane.rsplit("pid ", 1)[1] for lane in lanes} == pids
    assert all(lane.startswith("wt@") for lane in lanes)
    assert {title.split("#")[1].split()[0] for _, _, title in bars(timeline).values()} <= runs
    assert {f'href="/runs/{run}/"' in timeline for run in runs} == {True}

    # Someone outside the team sees none of it.
    client.force_login(people.outsider)
    elsewhere = client.get("/workers/?hours=1").content.decode()
    assert not LANE.findall(elsewhere) and not any(f"/runs/{run}/" in elsewhere for run in runs)
    assert "0 attempts on 0 processes" in elsewhere
    assert client.get(f"/workflows/{workflow.pk}/?run={wf_run.pk}").status_code == 404
