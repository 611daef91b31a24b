"""jobsctl cancel, runs rerun, backfill and workflows against a live service (a real gunicorn web process, a
real worker where a run must finish, jobsctl installed from pyproject.toml and run as a
subprocess): what each prints, its --json, its exit codes and its errors."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from audit.models import AuditEntry
from jobs import lifecycle
from jobs.access import tokens
from jobs.models import JobRun, RunStatus
from workflows.definitions import parse_graph, save_workflow
from workflows.models import Workflow, WorkflowRun

from .test_cli import HOURLY, lines, make_job

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def people(transactional_db):
    """Tokens of the owner of the jobs and of an outsider (tests.test_cli.make_job's users)."""
    users = [User.objects.create_user(name) for name in ("owner", "outsider")]
    return {user.username: tokens.create(user)[1] for user in users}


def test_cancel_cancels_a_run_once_and_exits_3_for_one_you_cannot_see(jobsctl, people):
    run = lifecycle.create_run(make_job("idle"))  # no worker: the run stays queued

    cancelled = jobsctl("cancel", run.pk, token=people["owner"])
    assert (cancelled.returncode, cancelled.stdout) == (0, f"run {run.pk}: Cancelled.\n"), cancelled.stderr
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and "jobsctl" not in run.reason
    again = json.loads(jobsctl("cancel", run.pk, "--json", token=people["owner"]).stdout)
    assert (again["status"], again["detail"]) == ("cancelled", "The run is already cancelled; nothing changed.")

    hidden = jobsctl("cancel", run.pk, token=people["outsider"])
    assert (hidden.returncode, hidden.stderr) == (3, f"jobsctl: no run {run.pk} (or it is not yours to see).\n")
    bad = jobsctl("cancel", "last", token=people["owner"])
    assert bad.returncode == 2 and "'last' is not a valid integer" in bad.stderr


def test_runs_rerun_queues_a_finished_run_again_and_refuses_one_not_finished(jobsctl, people):
    run = lifecycle.create_run(make_job("once"))  # no worker: it stays queued until cancelled
    lifecycle.cancel(run)

    rerun = jobsctl("runs", "rerun", run.pk, token=people["owner"])
    assert (rerun.returncode, rerun.stdout) == (0, f"run {run.pk}: queued again as attempt 2.\n"), rerun.stderr
    assert JobRun.objects.values_list("status", "attempt").get(pk=run.pk) == ("queued", 2)
    again = jobsctl("runs", "rerun", run.pk, token=people["owner"])
    assert (again.returncode, again.stderr) == (
        6, f"jobsctl: refused: Run #{run.pk} is queued: only a finished run can be rerun.\n")
    hidden = jobsctl("runs", "rerun", run.pk, token=people["outsider"])
    assert (hidden.returncode, hidden.stderr) == (3, f"jobsctl: no run {run.pk} (or it is not yours to see).\n")
    listed = jobsctl("runs", "once", "--json", token=people["owner"])  # the listing is the group's first word
    assert [found["id"] for found in json.loads(listed.stdout)] == [run.pk], listed.stderr
    assert AuditEntry.objects.filter(action="rerun", run_id=run.pk).count() == 1


def test_runs_rerun_of_many_lists_with_dry_run_then_reruns_a_jobs_finished_runs(jobsctl, people):
    job = make_job("many")
    runs = [lifecycle.create_run(job) for _ in range(2)]
    for run in runs:
        lifecycle.cancel(run)
    ids = ", ".join(str(run.pk) for run in runs)

    dry = jobsctl("runs", "rerun", "--job", "many", "--status", "cancelled", "--since", "1h", "--dry-run",
                  token=people["owner"])
    assert (dry.returncode, dry.stdout) == (0, f"Would rerun 2 run(s): {ids}.\n"), dry.stderr
    assert set(JobRun.objects.filter(job=job).values_list("status", flat=True)) == {"cancelled"}
    done = jobsctl("runs", "rerun", "--job", "many", "--status", "cancelled", "--since", "1h", token=people["owner"])
    assert (done.returncode, done.stdout) == (0, f"Rerun 2 run(s): {ids}.\n"), done.stderr
    assert set(JobRun.objects.filter(job=job).values_list("status", "attempt")) == {("queued", 2)}
    both = jobsctl("runs", "rerun", str(runs[0].pk), "--job", "many", token=people["owner"])
    neither = jobsctl("runs", "rerun", "--status", "failed", token=people["owner"])
    assert (both.returncode, neither.returncode) == (2, 2) and "RUN_ID" in neither.stderr


def test_backfill_lists_with_dry_run_then_creates_the_runs_of_past_slots_once(jobsctl, people):
    job = make_job("hourly", HOURLY)
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    slots = [first, first + timedelta(hours=1)]
    start, end = first.isoformat(), (first + timedelta(hours=1, minutes=30)).isoformat()

    dry = jobsctl("backfill", "hourly", "--start", start, "--end", end, "--dry-run", token=people["owner"])
    assert dry.returncode == 0, dry.stderr
    assert [row.split()[:2] for row in lines(dry.stdout)[1:3]] == [slot.strftime("%Y-%m-%d %H:%M:%S").split()
                                                                     for slot in slots]
    assert lines(dry.stdout)[-1] == "dry run: 2 run(s) to create, 0 slot(s) already have one; nothing was created."
    assert not JobRun.objects.exists()

    done = jobsctl("backfill", "hourly", "--start", start, "--end", end, token=people["owner"])
    assert done.returncode == 0, done.stderr
    made = list(JobRun.objects.order_by("scheduled_for"))
    assert [(run.scheduled_for, run.trigger) for run in made] == [(slot, "backfill") for slot in slots]
    assert done.stdout == (f"Backfilled hourly: 2 run(s) queued ({made[0].pk}, {made[1].pk}); "
                           "0 slot(s) already had a run.\n")
    again = json.loads(jobsctl("backfill", str(job.pk), "--from", start, "--to", end, "--json",
                               token=people["owner"]).stdout)
    assert (again["created"], [slot["run"] for slot in again["slots"]]) == ([], [made[0].pk, made[1].pk])
    assert JobRun.objects.count() == 2


def test_backfill_refuses_bad_input_with_one_line_and_creates_nothing(jobsctl, people):
    make_job("hourly", HOURLY)
    make_job("by-hand")
    now = datetime.now(UTC)
    cases = [
        (["hourly", "--start", "yesterday", "--end", "1h"], 2, "--start: 'yesterday' is not a time"),
        (["hourly", "--start", "1h", "--end", "3h"], 6, "refused: end: Must be after start."),
        (["hourly", "--start", "2h", "--end", (now + timedelta(hours=2)).isoformat()], 6,
         "refused: end: Must not be in the future"),
        (["by-hand", "--start", "2h", "--end", "1h"], 6, "refused: job: The job has no schedule"),
        (["nope", "--start", "2h", "--end", "1h"], 3, "no job named 'nope'"),
        (["hourly", "--start", "2h"], 2, "Missing option '--end'"),
    ]
    for args, code, message in cases:
        result = jobsctl("backfill", *args, token=people["owner"])
        assert result.returncode == code, (args, result.stderr)
        assert message in result.stderr and result.stdout == "", (args, result.stderr)
    assert not JobRun.objects.exists()


def make_workflow(name, owner, nodes, edges):
    jobs = {job.name: job for job in (make_job(node) for node in nodes)}
    return save_workflow(Workflow(name=name, owner=User.objects.get(username=owner)), {"type": "manual"},
                         parse_graph(nodes, [{"from": a, "to": b} for a, b in edges], jobs))


def test_workflow_commands_list_show_run_pause_resume(jobsctl, people, processes):
    workflow = make_workflow("etl", "owner", ["extract", "load"], [("extract", "load")])
    processes.worker()

    listed = lines(jobsctl("workflows", "list", token=people["owner"]).stdout)
    assert listed[0].split()[:4] == ["ID", "NAME", "JOBS", "SCHEDULE"]
    assert listed[1].split()[:4] == [str(workflow.pk), "etl", "2", "manual"]
    assert jobsctl("workflows", "list", token=people["outsider"]).stdout == "No workflows.\n"

    ran = jobsctl("workflows", "run", "etl", "--wait", "--interval", "0.3", token=people["owner"])
    assert ran.returncode == 0, ran.stderr
    wf_run = WorkflowRun.objects.get()
    assert lines(ran.stdout)[0] == f"workflow run {wf_run.pk} of etl: succeeded"
    assert [row.split()[:2] for row in lines(ran.stdout)[1:]] == [["extract:", "succeeded"], ["load:", "succeeded"]]

    shown = jobsctl("workflows", "show", str(workflow.pk), token=people["owner"]).stdout
    assert "nodes                extract, load" in shown and "  extract -> load" in shown
    assert [str(wf_run.pk), "etl", "succeeded", "manual"] in [row.split()[:4] for row in lines(shown)]
    status = json.loads(jobsctl("workflows", "status", wf_run.pk, "--json", token=people["owner"]).stdout)
    assert [(step["job_name"], step["run_status"]) for step in status["steps"]] == [
        ("extract", "succeeded"), ("load", "succeeded")]

    assert jobsctl("workflows", "pause", "etl", token=people["owner"]).stdout == "Paused etl.\n"
    assert Workflow.objects.get().enabled is False
    assert jobsctl("workflows", "resume", "etl", token=people["owner"]).stdout.startswith("Resumed etl;")
    assert Workflow.objects.get().enabled is True
    assert [e.action for e in AuditEntry.objects.filter(subject="workflow").order_by("id")] == [
        "run_now", "pause", "resume"]


def test_workflow_runs_cancel_and_rerun(jobsctl, people):
    make_workflow("etl", "owner", ["extract", "load"], [("extract", "load")])
    started = json.loads(jobsctl("workflows", "run", "etl", "--json", token=people["owner"]).stdout)  # no worker
    assert started["status"] == "running"

    cancelled = jobsctl("workflows", "cancel", started["id"], token=people["owner"])
    assert cancelled.stdout == f"workflow run {started['id']}: Cancelled.\n", cancelled.stderr
    assert WorkflowRun.objects.get().status == "cancelled"
    assert JobRun.objects.get().status == RunStatus.CANCELLED  # its active step's run

    rerun = jobsctl("workflows", "rerun", started["id"], token=people["owner"])
    assert rerun.returncode == 0, rerun.stderr
    new_run = WorkflowRun.objects.get(rerun_of_id=started["id"])
    assert rerun.stdout == f"Workflow run {new_run.pk} of etl re-runs {started['id']}.\n"
    twice = jobsctl("workflows", "rerun", started["id"], token=people["owner"])
    assert twice.returncode == 6 and twice.stderr.startswith(f"jobsctl: refused: Workflow run #{started['id']} "
                                                             "was already re-run")
    history = lines(jobsctl("workflows", "runs", "etl", token=people["owner"]).stdout)
    assert [row.split()[:3] for row in history[1:]] == [[str(new_run.pk), "etl", "running"],
                                                        [str(started["id"]), "etl", "cancelled"]]

    for args in (["cancel", "424242"], ["status", "424242"], ["rerun", "424242"]):
        missing = jobsctl("workflows", *args, token=people["owner"])
        assert (missing.returncode, missing.stderr) == (3, "jobsctl: no workflow run 424242 (or it is not yours "
                                                           "to see).\n")
    hidden = jobsctl("workflows", "cancel", new_run.pk, token=people["outsider"])
    assert hidden.returncode == 3
    assert jobsctl("workflows", "run", "nope", token=people["owner"]).returncode == 3
    assert WorkflowRun.objects.get(pk=new_run.pk).status == "running"
