"""manage.py jobs / runs / scheduler, as an operator at a terminal would use them."""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import CommandError
from django.utils import timezone

from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, RunTrigger
from jobs.scheduling.leader import Leadership

from .conftest import REPO, command_output


def make_job(name, schedule=None, **fields):
    fields.setdefault("kind", "callable")
    fields.setdefault("target", "builtin.noop")
    return save_job(Job(name=name, **fields), schedule or {"type": "manual"})


def make_run(job, status=RunStatus.SUCCEEDED, ago=timedelta(0), **fields):
    moment = timezone.now() - ago
    run = JobRun.objects.create(job=job, status=status, scheduled_for=moment, created_at=moment, **fields)
    Job.objects.filter(pk=job.pk).update(last_run=run)
    return run


@pytest.mark.django_db
def test_it_lists_jobs_with_their_schedule_and_last_run():
    nightly = make_job("nightly", {"type": "cron", "cron": "30 2 * * *", "timezone": "Europe/Berlin"})
    make_run(nightly, status=RunStatus.FAILED)
    paused = make_job("poller", {"type": "interval", "every_seconds": 30})
    paused.enabled = False
    paused.save()

    lines = command_output("jobs", "list").splitlines()

    assert lines[0].split() == ["NAME", "KIND", "SCHEDULE", "ENABLED", "NEXT", "RUN", "LAST", "RUN"]
    nightly_line = next(line for line in lines if line.startswith("nightly"))
    assert "At 02:30 AM (30 2 * * *, Europe/Berlin)" in nightly_line
    assert nightly_line.split()[-1] == "failed"
    poller_line = next(line for line in lines if line.startswith("poller"))
    assert "Every 30 seconds" in poller_line and " no " in poller_line and "(paused)" in poller_line


@pytest.mark.django_db
def test_it_shows_a_job_with_its_next_and_last_runs():
    job = make_job("report", {"type": "cron", "cron": "0 9 * * 1", "timezone": "America/New_York"},
                   target="builtin.echo", kwargs={"to": "ops"}, max_retries=3)
    old = [make_run(job, ago=timedelta(hours=h), worker=f"w{h}@host") for h in range(7, 0, -1)]
    job.refresh_from_db()

    out = command_output("jobs", "show", "report")

    assert "target" in out and "builtin.echo" in out and "{'to': 'ops'}" in out
    assert "At 09:00 AM, only on Monday (0 9 * * 1, America/New_York)" in out
    next_runs = out.split("Next 5 runs:")[1].split("Last 5 runs:")[0].strip().splitlines()
    assert len(next_runs) == 5
    first = job.upcoming_slots(1)[0]
    assert next_runs[0].strip().startswith(first.strftime("%Y-%m-%d %H:%M:%S UTC"))
    assert "(" in next_runs[0] and ("EST" in next_runs[0] or "EDT" in next_runs[0])
    last_runs = out.split("Last 5 runs:")[1]
    assert [f"w{h}@host" in last_runs for h in range(1, 8)] == [True] * 5 + [False] * 2
    assert str(old[-1].pk) in last_runs


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["show", "run", "pause", "resume"])
def test_it_rejects_an_unknown_job_name(action):
    with pytest.raises(CommandError, match="No job named 'ghost'"):
        command_output("jobs", action, "ghost")


@pytest.mark.django_db
def test_it_queues_a_manual_run_and_prints_its_id():
    job = make_job("adhoc")

    out = command_output("jobs", "run", "adhoc")

    run = JobRun.objects.get(job=job)
    assert (run.trigger, run.status) == (RunTrigger.MANUAL, RunStatus.QUEUED)
    assert out.strip() == f"Run {run.pk} of adhoc queued."


@pytest.mark.django_db
def test_it_exits_2_when_the_wait_times_out():
    make_job("nobody-runs-me")

    with pytest.raises(CommandError, match="still queued after 0.5s") as raised:
        command_output("jobs", "run", "nobody-runs-me", "--wait", "--timeout", "0.5")
    assert raised.value.returncode == 2


@pytest.mark.django_db
def test_it_pauses_and_resumes_a_job():
    job = make_job("hourly", {"type": "cron", "cron": "0 * * * *"})

    assert command_output("jobs", "pause", "hourly").strip() == "Paused hourly."
    job.refresh_from_db()
    assert job.enabled is False

    out = command_output("jobs", "resume", "hourly")
    job.refresh_from_db()
    assert job.enabled is True
    assert out.strip() == f"Resumed hourly; next run {job.next_run_at.strftime('%Y-%m-%d %H:%M:%S')} UTC."


@pytest.mark.django_db
def test_it_lists_runs_newest_first_with_filters():
    a, b = make_job("alpha"), make_job("beta")
    old = make_run(a, ago=timedelta(hours=3))
    failed = make_run(a, status=RunStatus.FAILED, ago=timedelta(minutes=30))
    newest = make_run(b, ago=timedelta(minutes=5))

    def ids(*args):
        lines = command_output("runs", "list", *args).splitlines()
        return [int(line.split()[0]) for line in lines[2:]] if lines[0].startswith("ID") else []

    assert ids() == [newest.pk, failed.pk, old.pk]
    assert ids("--job", "alpha") == [failed.pk, old.pk]
    assert ids("--status", "failed") == [failed.pk]
    assert ids("--since", "1h") == [newest.pk, failed.pk]
    since = (timezone.now() - timedelta(minutes=10)).isoformat()
    assert ids("--since", since) == [newest.pk]
    assert ids("--limit", "1") == [newest.pk]
    assert command_output("runs", "list", "--job", "beta", "--status", "failed").strip() == "No runs."
    with pytest.raises(CommandError, match="--since 'yesterday'"):
        command_output("runs", "list", "--since", "yesterday")


@pytest.mark.django_db
def test_it_reports_the_scheduler_status():
    due = make_job("due-soon", {"type": "interval", "every_seconds": 60})
    make_job("due-later", {"type": "interval", "every_seconds": 3600})
    make_job("manual")
    make_run(due, status=RunStatus.FAILED, ago=timedelta(minutes=10))
    make_run(due, ago=timedelta(minutes=20))
    make_run(due, ago=timedelta(minutes=30))
    make_run(due, ago=timedelta(hours=2))

    assert "leader: none" in command_output("scheduler", "status")

    leadership = Leadership(name="node-a")
    assert leadership.refresh()
    out = command_output("scheduler", "status")
    leadership.release()

    assert "leader: node-a since " in out
    assert "enabled jobs: 3 (of 3)" in out
    assert "next due job: due-soon at " in out
    assert "runs in the last hour: 3" in out
    assert "  succeeded: 2" in out and "  failed: 1" in out


def test_it_waits_for_a_run_and_exits_with_its_outcome(processes):
    make_job("say-hello", kind="command", target="echo hello-from-the-cli")
    make_job("doomed", target="builtin.fail")
    processes.worker()

    def jobs_run(name):
        return subprocess.run([sys.executable, "manage.py", "jobs", "run", name, "--wait", "--timeout", "60"],
                              cwd=REPO, env=processes.env(), capture_output=True, text=True, timeout=90)

    ok = jobs_run("say-hello")
    assert ok.returncode == 0, ok.stderr
    assert "status: succeeded" in ok.stdout
    assert "hello-from-the-cli" in ok.stdout

    failed = jobs_run("doomed")
    assert failed.returncode == 1, failed.stderr
    assert "status: failed" in failed.stdout
    assert "failing on purpose" in failed.stdout
    assert "ended failed" in failed.stderr
