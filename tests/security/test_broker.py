"""The broker is no back door: whoever reaches it (a local process, a command) cannot steer the
workers through Celery's remote control unless an operator turned it on, and what a run returns
(an HTTP answer's headers, which may carry a token) does not reach the worker's log."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus

from ..conftest import wait_for
from .servers import Target

pytestmark = pytest.mark.postgres("starts workers")

TOKEN = "session-token-from-the-server-71c4"


def inspect_ping(processes, worker_name):
    return subprocess.run([sys.executable, "-m", "celery", "-A", "scheduler_site", "inspect", "ping",
                           "-d", worker_name, "--timeout", "5"], env=processes.env(), capture_output=True,
                          text=True, timeout=120)


def started(processes, **env):
    worker = processes.worker(concurrency=1, name="steered", **env)
    wait_for(lambda: "ready." in Path(worker.log_path).read_text(), timeout=60, message="the worker to start")
    return f"steered@{socket.gethostname()}"


def test_a_worker_answers_no_remote_control_by_default(processes):
    name = started(processes)

    answer = inspect_ping(processes, name)

    assert answer.returncode != 0
    assert "No nodes replied" in answer.stdout + answer.stderr
    assert "pong" not in answer.stdout
    # Nor does it obey: a shutdown is dropped, unanswered, and the worker goes on.
    subprocess.run([sys.executable, "-m", "celery", "-A", "scheduler_site", "control", "shutdown", "-d", name,
                    "--timeout", "2"], env=processes.env(), capture_output=True, text=True, timeout=120)
    wait_for(lambda: "Dropped a remote control command (shutdown)" in Path(worker_log(processes)).read_text(),
             timeout=30, message="the worker to drop the shutdown")
    assert processes.started[0].poll() is None


def worker_log(processes):
    return processes.started[0].log_path


def test_an_operator_may_turn_remote_control_on(processes):
    name = started(processes, CELERY_WORKER_ENABLE_REMOTE_CONTROL="true")

    answer = inspect_ping(processes, name)

    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert f"{name}: OK" in answer.stdout and "pong" in answer.stdout


@pytest.fixture
def server_with_a_token():
    server = Target("127.0.0.2", routes={"/login": (200, {"X-Session-Token": TOKEN}, b"logged in")})
    yield server
    server.close()


def test_an_http_runs_answer_headers_do_not_reach_the_worker_log(processes, server_with_a_token, monkeypatch, settings):
    settings.JOBS_HTTP_ALLOWED_NETWORKS = ["127.0.0.2/32"]
    monkeypatch.setenv("JOBS_HTTP_ALLOWED_NETWORKS", "127.0.0.2/32")
    worker = processes.worker(concurrency=1)
    job = save_job(Job(name="login", kind="http", target=f"{server_with_a_token.url}/login"), {"type": "manual"})

    run = lifecycle.create_run(job)
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message="the run to end")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert TOKEN in str(run.result)  # kept with the run, for those who may see it
    log = Path(worker.log_path).read_text()
    assert f"Task jobs.execute_run[run-{run.pk}-1] succeeded in" in log
    assert TOKEN not in log
