"""A running attempt's output, saved by the worker's heartbeats: the API, the run page and
``manage.py runs tail`` show it before the run ends."""

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.access import tokens as api_tokens
from jobs.definitions.jobs import save_job
from jobs.execution.output import OutputTail, capture_prints
from jobs.management.commands.runs import Follower
from jobs.models import Job, JobRun, RunStatus
from jobs.worker import heartbeats

from .conftest import REPO, wait_for

# Eight lines, one a second: the run lasts about eight seconds.
COUNTING = 'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 1; done'


def command_job(name, target=COUNTING):
    return save_job(Job(name=name, kind="command", target=target), {"type": "manual"})


def api_client():
    staff = User.objects.create_user("watcher", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_tokens.create(staff)[1]}")
    return client, staff


def api_run_once_output_has(client, run, text):
    """The run as the API shows it, once its output holds ``text``."""
    return wait_for(lambda: (body := client.get(f"/api/runs/{run.pk}/").json()) and text in body["output"] and body,
                    timeout=30, message=f"{text!r} in the API")


def api_run_once_succeeded(client, run):
    return wait_for(lambda: (body := client.get(f"/api/runs/{run.pk}/").json())["status"] == "succeeded" and body,
                    timeout=40, message="the run to succeed")


def test_the_api_and_the_run_page_show_the_first_lines_while_the_command_runs(processes):
    client, staff = api_client()
    page = Client()
    page.force_login(staff)
    job = command_job("counting")
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    seen = api_run_once_output_has(client, run, "line 1\n")

    assert seen["status"] == "running"
    assert "line 8" not in seen["output"]
    assert seen["output_bytes"] == len(seen["output"].encode())
    live = page.get(f"/runs/{run.pk}/tail/").json()
    assert live["terminal"] is False and "line 1" in live["output"]
    assert "line 1" in live["html"]
    final = api_run_once_succeeded(client, run)
    assert final["output"].splitlines() == [f"line {i}" for i in range(1, 9)]


def test_a_function_jobs_prints_show_while_it_runs(processes):
    client, _ = api_client()
    job = save_job(Job(name="chatty", kind="callable", target="test.chatty", kwargs={"lines": 12, "every": 0.5}),
                   {"type": "manual"})
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    seen = api_run_once_output_has(client, run, "chatty line 1\n")

    assert seen["status"] == "running"
    assert "chatty line 12" not in seen["output"]
    final = api_run_once_succeeded(client, run)
    assert final["output"].splitlines() == [f"chatty line {i}" for i in range(1, 13)]


class TailCommand:
    """``manage.py runs tail`` in a process of its own. Its stdout is unbuffered (bufsize=0): ``first_line``
    reads byte by byte and leaves what follows the line in the pipe for ``communicate``, which reads
    the pipe, not a buffer. A buffered ``readline`` took lines 2 and 3 into its buffer along with
    line 1 when the tail printed them in one write, and ``communicate`` never saw them."""

    def __init__(self, processes, run):
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runs", "tail", str(run.pk), "--interval", "0.5"],
            cwd=REPO, env=processes.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)

    def first_line(self):
        return self.process.stdout.readline().decode()

    def communicate(self, timeout):
        """(the rest of stdout, stderr) once the tail has ended."""
        out, errors = self.process.communicate(timeout=timeout)
        return out.decode(), errors.decode()

    @property
    def returncode(self):
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:  # the test failed before the tail ended
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def gate():
    """A file a command waits for (``until [ -e PATH ]``), which the test makes when it has seen what
    it waited for; in a folder of its own that the command's user (nobody, on a root worker) can search."""
    folder = Path(tempfile.mkdtemp(prefix="gate-"))
    folder.chmod(0o755)
    yield folder / "open"
    shutil.rmtree(folder)


def test_runs_tail_prints_each_line_once_as_it_comes_and_exits_with_the_outcome(processes, gate):
    # Three lines, then the command waits at the gate, then five more, one every half second.
    job = command_job("counting-tail", target=f'for i in 1 2 3; do echo "line $i"; done; '
                                              f'until [ -e {gate} ]; do sleep 0.1; done; '
                                              'for i in 4 5 6 7 8; do echo "line $i"; sleep 0.5; done')
    doomed = command_job("doomed-tail", target='echo "partial work"; sleep 1; exit 3')
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    # The tail starts when the first three lines are saved: its first look prints them in one write
    # (as it does whenever it starts late, or a heartbeat saves several lines at once).
    wait_for(lambda: "line 3\n" in JobRun.objects.get(pk=run.pk).output, message="lines 1-3 saved")
    with TailCommand(processes, run) as follower:
        first_line = follower.first_line()
        run.refresh_from_db()
        status_then = run.status
        gate.touch()
        rest, errors = follower.communicate(timeout=60)

    assert first_line == "line 1\n"
    assert status_then == RunStatus.RUNNING  # printed while the run went on (held at the gate), not after it
    assert (first_line + rest).splitlines() == [f"line {i}" for i in range(1, 9)]
    assert follower.returncode == 0, errors
    assert f"Run {run.pk} of counting-tail ended succeeded" in errors

    with TailCommand(processes, lifecycle.create_run(doomed)) as failed:
        out, errors = failed.communicate(timeout=60)
    assert failed.returncode == 1
    assert out.splitlines() == ["partial work"]
    assert "ended failed" in errors and "exit" in errors


def test_a_heartbeat_saves_the_output_only_when_it_grew(transactional_db):
    job = command_job("quiet")
    run = lifecycle.create_run(job)
    assert lifecycle.claim(run.pk, 1, "w@host", 1) is not None
    tail = OutputTail(1024)
    entry = heartbeats._Held(tail)

    def statements():
        with CaptureQueriesContext(connection) as queries:
            heartbeats._beat(run.pk, 1, entry)
        return [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]

    assert not any('"output"' in sql for sql in statements())  # nothing printed yet: no output written
    tail.write(b"hello\n")
    assert any('"output"' in sql for sql in statements())
    assert not any('"output"' in sql for sql in statements())  # nothing new since
    run.refresh_from_db()
    assert (run.output, run.output_bytes) == ("hello\n", 6)


def test_a_capture_takes_only_its_own_threads_prints():
    mine, theirs = OutputTail(1024), OutputTail(1024)

    def other():
        with capture_prints(theirs):
            print("theirs")

    with capture_prints(mine):
        print("mine")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()

    assert (mine.text(), theirs.text()) == ("mine\n", "theirs\n")


def test_the_follower_prints_only_what_is_new_across_a_cut_tail_and_a_new_attempt():
    follower = Follower()
    run = SimpleNamespace(attempt=1, status=RunStatus.RUNNING, output="a\n", output_bytes=2)
    assert follower.follow(run) == "a\n"
    assert follower.follow(run) == ""
    cut = OutputTail(61)  # room for its line saying what was not kept (57 bytes here) and 4 bytes
    cut.write(b"a\n" + b"b" * 99 + b"\nc\nd\n")
    run.output, run.output_bytes = cut.snapshot()  # the b's were never seen and are not kept
    assert follower.follow(run) == "[100 bytes not kept]\nc\nd\n"

    run.attempt, run.status = 2, RunStatus.QUEUED  # the run still holds attempt 1's output
    assert follower.follow(run) == "--- attempt 2 ---\n"
    run.status = RunStatus.RUNNING
    assert follower.follow(run) == ""
    run.output, run.output_bytes = "again\n", 6
    assert follower.follow(run) == "again\n"
