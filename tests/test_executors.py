"""Each job kind run in-process, the way a worker runs it."""

import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from jobs.execution.output import OutputTail
from jobs.kinds import command as command_kind
from jobs.kinds import http as http_kind
from jobs.kinds.base import JobFailed, JobTimedOut, RunContext
from jobs.models import Job

KEY = "12:2026-03-01T06:00:00.000000Z"  # the worker gives the run's key (tests/test_idempotency_key.py)


def context(job, timeout=10, cancelled=None):
    job.timeout_seconds = timeout
    return RunContext(run_id=7, attempt=2, job=job, timeout_seconds=timeout, idempotency_key=KEY,
                      cancelled=cancelled)


def command(target, **fields):
    return Job(name="c", kind="command", target=target, **fields)


@override_settings(JOBS_OUTPUT_MAX_BYTES=64 * 1024)
def test_a_10_mb_output_is_capped_to_its_tail_and_counted():
    outcome = command_kind.execute(context(command("head -c 10000000 /dev/zero | tr '\\0' x; echo; echo THE-END")))
    assert outcome.output_bytes == 10_000_000 + 1 + len("THE-END\n")
    assert len(outcome.output) < 70 * 1024
    assert outcome.output.rstrip().endswith("THE-END")
    assert outcome.output.startswith("[")
    assert "earlier bytes of 10000009 not kept" in outcome.output


class StillWritten(OutputTail):
    """A tail its reader thread still writes to while the executor reads it (the reader's join timed
    out: a process that left the command's group holds the pipe): a chunk lands after each read."""

    def text(self):
        text = super().text()
        self.write(b"late\n")
        return text

    def snapshot(self):
        taken = super().snapshot()
        self.write(b"late\n")
        return taken


def test_a_commands_output_and_its_count_are_taken_at_one_moment():
    succeeding = context(command("echo done"))
    succeeding.output = StillWritten(1024)
    outcome = command_kind.execute(succeeding)
    assert (outcome.output, outcome.output_bytes) == ("done\n", 5)

    failing = context(command("echo half; exit 3"))
    failing.output = StillWritten(1024)
    with pytest.raises(JobFailed) as caught:
        command_kind.execute(failing)
    assert (caught.value.output, caught.value.output_bytes) == ("half\n", 5)


@override_settings(JOBS_KILL_GRACE_SECONDS=0.5)
def test_a_command_that_ignores_sigterm_is_killed_at_its_timeout():
    marker = "sleep 73.1337"
    started = time.monotonic()
    with pytest.raises(JobTimedOut) as caught:
        command_kind.execute(context(command(f"trap '' TERM; echo waiting; {marker}; echo never"), timeout=1))
    assert time.monotonic() - started < 10
    assert "waiting" in caught.value.output
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""


def test_a_non_zero_exit_fails_the_run_with_its_output():
    with pytest.raises(JobFailed) as caught:
        command_kind.execute(context(command("echo to-stdout; echo to-stderr >&2; exit 3")))
    assert str(caught.value) == "Command failed: exit code 3"
    assert "to-stdout" in caught.value.output and "to-stderr" in caught.value.output


def test_a_command_gets_its_environment_and_the_idempotency_key():
    outcome = command_kind.execute(context(command('echo "$GREETING $JOB_IDEMPOTENCY_KEY $JOB_ATTEMPT"',
                                                   environment={"GREETING": "hello"})))
    assert outcome.output.strip() == f"hello {KEY} 2"


def test_a_command_does_not_see_the_services_secrets(monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "the-service-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://admin:pw@db/scheduler")
    monkeypatch.setenv("UNRELATED_SETTING", "not allowed either")  # JOBS_COMMAND_ENV_ALLOW: an allow-list
    outcome = command_kind.execute(context(command('echo "[$SECRET_KEY][$DATABASE_URL][$UNRELATED_SETTING][$TOKEN]"',
                                                   environment={"TOKEN": "the-jobs-own"})))
    assert outcome.output.strip() == "[][][][the-jobs-own]"


def test_a_cancelled_command_is_stopped():
    cancelled = threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    with pytest.raises(JobFailed, match="cancelled"):
        command_kind.execute(context(command("sleep 30"), cancelled=cancelled))


class Recorder(BaseHTTPRequestHandler):
    status = 200
    seen = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Recorder.seen.append((self.path, dict(self.headers), body))
        self.send_response(Recorder.status)
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server(local_http_allowed):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Recorder.seen = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_an_http_job_sends_its_request_with_the_idempotency_key(http_server):
    Recorder.status = 201
    job = Job(name="h", kind="http", target=f"{http_server}/hook", http_method="POST",
              http_headers={"X-Team": "ops"}, http_body='{"a": 1}')
    outcome = http_kind.execute(context(job))
    path, headers, body = Recorder.seen[0]
    assert (path, body) == ("/hook", b'{"a": 1}')
    assert headers["Idempotency-Key"] == KEY and headers["X-Team"] == "ops"
    assert outcome.result["status"] == 201 and "Server" in outcome.result["headers"]


def test_an_http_job_fails_on_an_unaccepted_status(http_server):
    Recorder.status = 503
    job = Job(name="h", kind="http", target=f"{http_server}/hook", http_method="POST")
    with pytest.raises(JobFailed, match="Unexpected status 503"):
        http_kind.execute(context(job))
