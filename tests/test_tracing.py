"""Traces (jobs.telemetry.tracing): each run is one trace, from the scheduler's dispatch through its
message and the worker's attempt (claim, execution and outcome, one span) to the notifications it
caused (off, not one module of OpenTelemetry's SDK is loaded: tests/test_process_start.py)."""

import json

import pytest
from django.conf import settings
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus
from jobs.telemetry import tracing
from jobs.worker.task import execute_run
from notifications.models import Channel, Delivery, Rule
from notifications.sending import send_delivery

from .conftest import wait_for
from .otlp_receiver import OTLPReceiver

# The run's trace as docs/guide/observability.md draws it: each step and its parent's name.
PARENTS = {"dispatch": None, "publish jobs.execute_run": "dispatch", "run/jobs.execute_run": "publish jobs.execute_run",
           "notify": "run/jobs.execute_run", "notification.send": "dispatch"}
STEPS = list(PARENTS)


@pytest.fixture
def memory_traces():
    exporter = InMemorySpanExporter()
    tracing.start(exporter=exporter)
    yield exporter
    tracing.stop()


def traced_job(receiver, name="traced"):
    job = save_job(Job(name=name, kind="http", target=f"{receiver.url}/called", http_method="POST", queue="jobs"),
                   {"type": "manual"})
    channel = Channel.objects.create(name=f"{name} hook", kind="webhook", config={"url": f"{receiver.url}/hook"})
    Rule.objects.create(channel=channel, events=["succeeded"])
    return job


def trace_id_of(run_id):
    return JobRun.objects.get(pk=run_id).traceparent.split("-")[1]


def assert_one_trace_of_every_step(spans, run, job, receiver):
    by_name = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert set(STEPS) <= set(by_name), f"missing steps: {set(STEPS) - set(by_name)}"
    # One trace, connected: every span but the dispatch has its parent in it.
    names = {span["span_id"]: span["name"] for span in spans}
    roots = [span for span in spans if span["parent"] not in names]
    assert [root["name"] for root in roots] == ["dispatch"]
    assert {name: names.get(by_name[name][0]["parent"]) for name in STEPS} == PARENTS
    # The worker's attempt is one span: the claim, the execution and the outcome are in it; under it,
    # the deliveries its outcome planned and (from a worker, on commit) the message that sends them.
    assert {span["name"] for span in spans if names.get(span["parent"]) == "run/jobs.execute_run"} <= {
        "notify", "apply_async/notifications.send_delivery"}
    for name in STEPS:
        assert by_name[name][0]["attributes"]["jobs.run.id"] == run.pk, name
    dispatch = by_name["dispatch"][0]["attributes"]
    assert dispatch["jobs.job.name"] == job.name and dispatch["jobs.job.kind"] == "http"
    assert dispatch["jobs.job.queue"] == "jobs" and dispatch["jobs.run.id"] == run.pk
    assert dispatch["jobs.run.attempt"] == 1 and dispatch["jobs.run.slot"] == run.scheduled_for.isoformat()
    attempt = by_name["run/jobs.execute_run"][0]
    assert {key: value for key, value in attempt["attributes"].items() if key.startswith("jobs.")} == {
        "jobs.run.id": run.pk, "jobs.run.attempt": 1, "jobs.job.name": job.name, "jobs.job.kind": "http",
        "jobs.job.queue": "jobs", "jobs.run.slot": run.scheduled_for.isoformat(), "jobs.run.outcome": "succeeded"}
    # The service the HTTP job called was handed the trace, at the attempt's span.
    called = [{k.lower(): v for k, v in r["headers"].items()} for r in receiver.requests if r["path"] == "/called"]
    traceparents = [headers["traceparent"].split("-") for headers in called
                    if headers["idempotency-key"] == run.idempotency_key]
    assert [(trace_id, parent) for _, trace_id, parent, _ in traceparents] == [
        (spans[0]["trace_id"], attempt["span_id"])]


@pytest.mark.postgres("Celery's task_prerun handler closes SQLite's in-memory test database (jobs.worker.signals)")
def test_a_run_is_one_trace_from_dispatch_to_its_notification_in_process(db, redis_client, memory_traces,
                                                                         local_http_allowed,
                                                                         django_capture_on_commit_callbacks):
    with OTLPReceiver() as receiver:
        job = traced_job(receiver)
        with django_capture_on_commit_callbacks(execute=True):
            run = lifecycle.create_run(job)
        # The message the broker holds, taken as a worker would, its headers and all.
        lists = redis_client.keys(f"{settings.JOBS_DEFAULT_QUEUE}*")  # kombu's list per priority
        message = json.loads(next(m for m in (redis_client.rpop(key) for key in lists) if m))
        assert message["headers"]["traceparent"].split("-")[1] == trace_id_of(run.pk)
        with django_capture_on_commit_callbacks(execute=True):
            execute_run.apply(args=[run.pk, 1], headers=message["headers"], task_id=message["headers"]["id"])
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED
        delivery = Delivery.objects.get(run=run)
        assert send_delivery(delivery.pk) == "sent"

        trace_id = trace_id_of(run.pk)
        spans = [{"name": s.name, "trace_id": f"{s.context.trace_id:032x}", "span_id": f"{s.context.span_id:016x}",
                  "parent": f"{s.parent.span_id:016x}" if s.parent else "", "attributes": dict(s.attributes)}
                 for s in memory_traces.get_finished_spans() if f"{s.context.trace_id:032x}" == trace_id]
        assert_one_trace_of_every_step(spans, run, job, receiver)


@pytest.mark.postgres("real processes")
def test_a_scheduled_run_is_one_trace_across_beat_and_worker_sent_to_an_otlp_receiver(processes, local_http_allowed):
    with OTLPReceiver() as receiver:
        job = traced_job(receiver, name="traced-interval")
        save_job(job, {"type": "interval", "every_seconds": 2})
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "200"}
        processes.worker(**env)
        processes.beat(**env)

        wait_for(lambda: Delivery.objects.filter(run__job=job, status="sent").exists(), timeout=60,
                 message="the run's notification to be sent")
        run = Delivery.objects.filter(run__job=job, status="sent").order_by("pk").first().run
        trace_id = trace_id_of(run.pk)

        def whole():
            return set(STEPS) <= {span.name for span in receiver.trace(trace_id)}

        wait_for(whole, timeout=30, message=f"every step of the run's trace at the receiver; "
                 f"got {sorted((s.name, s.service) for s in receiver.trace(trace_id))}, {len(receiver.spans)} spans in all")
        spans = [{"name": s.name, "trace_id": s.trace_id, "span_id": s.span_id, "parent": s.parent_span_id,
                  "attributes": s.attributes, "service": s.service} for s in receiver.trace(trace_id)]
        assert_one_trace_of_every_step(spans, run, job, receiver)
        services = {span["name"]: span["service"] for span in spans}
        assert services["dispatch"] == "scheduler-beat" and services["run/jobs.execute_run"] == "scheduler-worker"
