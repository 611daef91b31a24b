"""An HTTP job through a real worker against a local HTTP server: the request carries the job's
method, body and an Idempotency-Key of "<job id>:<slot>", the same on each attempt."""

import threading
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .conftest import wait_for


@pytest.fixture
def endpoint():
    """A local server answering 503 to its first request and 200 after; it records each request."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append({"path": self.path, "key": self.headers.get("Idempotency-Key"), "body": body})
            status = 503 if len(seen) == 1 else 200
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(f"answer {len(seen)}".encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.seen = seen
    server.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield server
    server.shutdown()
    server.server_close()


def test_an_http_job_sends_its_idempotency_key_and_retries_with_the_same_one(processes, endpoint, local_http_allowed):
    job = save_job(Job(name="webhook", kind="http", target=endpoint.url, http_method="POST",
                       http_body='{"report": "nightly"}', max_retries=1, retry_backoff_seconds=0.2,
                       retry_jitter=False), {"type": "manual"})
    processes.worker(concurrency=1)
    processes.beat()

    run = lifecycle.create_run(job)
    wait_for(lambda: run.__class__.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=40,
             message="the run to succeed")

    run.refresh_from_db()
    key = f"{job.pk}:{run.scheduled_for.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"
    assert [(r["path"], r["key"], r["body"]) for r in endpoint.seen] == [
        ("/hook", key, b'{"report": "nightly"}'),
        ("/hook", key, b'{"report": "nightly"}'),
    ]
    assert run.attempt == 2
    assert run.output == "HTTP 200\nanswer 2"
    assert run.result["status"] == 200
    assert run.attempts.get(number=1).error == "Unexpected status 503"


@pytest.fixture
def flooding_endpoint():
    """A local server answering 200 with 90 headers of 64,000 bytes each (5.76 MB) and a 4 MB body."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            for i in range(90):
                self.send_header(f"X-Flood-{i}", "h" * 64_000)
            body = b"b" * (4 * 1024 * 1024)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/flood"
    yield server
    server.shutdown()
    server.server_close()


def test_an_http_answer_of_megabytes_of_headers_is_stored_within_the_output_cap(
        processes, flooding_endpoint, local_http_allowed, settings):
    job = save_job(Job(name="flooded", kind="http", target=flooding_endpoint.url), {"type": "manual"})
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    wait_for(lambda: run.__class__.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=40,
             message="the run to succeed")

    with connection.cursor() as cursor:
        cursor.execute("SELECT octet_length(output) + octet_length(result::text) FROM jobs_jobrun WHERE id = %s",
                       [run.pk])
        (stored_bytes,) = cursor.fetchone()
    assert stored_bytes <= settings.JOBS_OUTPUT_MAX_BYTES
    run.refresh_from_db()
    assert run.result["status"] == 200 and run.result["headers"]["Content-Type"] == "text/plain"
    assert "header(s) not kept" in run.result["headers_not_kept"]
    assert run.output.startswith("HTTP 200\nbbbb")
    assert run.output.endswith(f"[the body was {4 * 1024 * 1024} bytes; the rest not kept]")
    assert run.output_bytes == 4 * 1024 * 1024
