"""GET /metrics: what Prometheus sees after runs happened, who may scrape, and what a scrape costs."""

import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from jobs import lifecycle
from jobs.coordination import leases
from jobs.definitions.jobs import save_job
from jobs.lifecycle import DUPLICATES_DROPPED
from jobs.models import DeliveryCounter, Job, JobAttempt, JobRun, RunStatus
from notifications.models import Channel, Delivery

from .conftest import wait_for

# On SQLite /metrics serves the portable families only (test_it_serves_what_the_database_can_on_sqlite_and_postgresql):
# the others are PostgreSQL SQL (EXTRACT(EPOCH ...), make_interval, a statement_timeout per scrape).
POSTGRES = pytest.mark.postgres("metrics SQL")


def make_job(name, target="builtin.noop", **fields):
    return save_job(Job(name=name, kind="callable", target=target, **fields), {"type": "manual"})


def scrape(client, **headers):
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def add_run(job, status, ago, *, lag=0.0, duration=None, attempts=("succeeded",), created_ago=None):
    """A run as the worker leaves it: slot ``ago`` seconds back, first attempt started ``lag`` later,
    the run's started_at being its last attempt's start."""
    now = timezone.now()
    scheduled_for = now - timedelta(seconds=ago)
    first_start = scheduled_for + timedelta(seconds=lag)
    started = first_start + timedelta(seconds=len(attempts) - 1) if attempts else None
    finished = started + timedelta(seconds=duration) if duration is not None else None
    run = JobRun.objects.create(
        job=job, status=status, scheduled_for=scheduled_for, attempt=max(1, len(attempts)),
        max_attempts=max(1, len(attempts)), queued_at=scheduled_for, started_at=started, finished_at=finished,
        created_at=now - timedelta(seconds=created_ago if created_ago is not None else ago),
    )
    for number, outcome in enumerate(attempts, start=1):
        JobAttempt.objects.create(run=run, number=number, outcome=outcome, task_id=f"run-{run.pk}-{number}",
                                  started_at=first_start if number == 1 else started)
    return run


@pytest.fixture
def open_metrics(settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1", "::1"]
    return settings


@POSTGRES
def test_it_reports_counters_gauges_and_histograms_from_the_database_and_the_broker(db, client, redis_client,
                                                                                open_metrics):
    alpha = make_job("alpha")
    beta = make_job("beta", sla_seconds=10, queue="reports")
    old = make_job("old")
    add_run(alpha, RunStatus.SUCCEEDED, 100, lag=1, duration=2)
    add_run(alpha, RunStatus.SUCCEEDED, 60, lag=5, duration=20)
    add_run(alpha, RunStatus.FAILED, 50, lag=0, duration=0.3, attempts=("lost", "failed"))
    add_run(beta, RunStatus.RUNNING, 31, lag=1, attempts=("running",))
    add_run(beta, RunStatus.QUEUED, 5, attempts=())
    add_run(beta, RunStatus.RETRYING, 40, lag=2, attempts=("failed",))
    add_run(old, RunStatus.SUCCEEDED, 2 * 86400, duration=1)
    DeliveryCounter.increment(DUPLICATES_DROPPED, 3)
    channel = Channel.objects.create(name="ops", kind="webhook", config={"url": "http://127.0.0.1:9/"})
    for i, status in enumerate(["sent", "sent", "failed"]):
        Delivery.objects.create(event="failed", channel=channel, status=status, dedup_key=f"k{i}")
    redis_client.rpush(django_settings.JOBS_DEFAULT_QUEUE, "m1", "m2")
    redis_client.rpush("reports", "m3")
    held = leases.take(django_settings.JOBS_LEADER_KEY, "node-a", ttl=60)
    before_tick = time.time()
    leases.note_tick(held)

    samples = scrape(client)

    assert value(samples, "jobs_runs_finished_total", job="alpha", status="succeeded") == 2
    assert value(samples, "jobs_runs_finished_total", job="alpha", status="failed") == 1
    assert not [key for key in samples if ("job", "old") in key[1]]  # no run in the window: no series
    assert {s: value(samples, "jobs_runs", status=s) for s in ["pending", "queued", "running", "retrying"]} == {
        "pending": 0, "queued": 1, "running": 1, "retrying": 1}

    assert value(samples, "jobs_run_duration_seconds_count", job="alpha") == 3
    assert value(samples, "jobs_run_duration_seconds_sum", job="alpha") == pytest.approx(22.3)
    assert value(samples, "jobs_run_duration_seconds_bucket", job="alpha", le="0.5") == 1
    assert value(samples, "jobs_run_duration_seconds_bucket", job="alpha", le="5.0") == 2
    assert value(samples, "jobs_run_duration_seconds_bucket", job="alpha", le="+Inf") == 3
    assert value(samples, "jobs_run_duration_seconds_count", job="beta") is None  # nothing finished

    # First attempts: lags 1, 5, 0 (alpha), 1 and 2 (beta); the queued run has not started.
    assert value(samples, "jobs_dispatch_lag_seconds_count") == 5
    assert value(samples, "jobs_dispatch_lag_seconds_sum") == pytest.approx(9, abs=0.01)
    assert value(samples, "jobs_dispatch_lag_seconds_bucket", le="1.0") == 3
    assert value(samples, "jobs_dispatch_lag_seconds_bucket", le="2.0") == 4

    assert value(samples, "jobs_sla_overruns_total", job="beta") == 1
    assert value(samples, "jobs_retries_total") == 1
    assert value(samples, "jobs_lost_attempts_total") == 1
    assert value(samples, "jobs_duplicate_deliveries_dropped_total") == 3
    assert value(samples, "jobs_notification_deliveries", status="sent") == 2
    assert value(samples, "jobs_notification_deliveries", status="failed") == 1
    assert value(samples, "jobs_notification_deliveries", status="pending") == 0

    assert value(samples, "jobs_queue_depth", queue=django_settings.JOBS_DEFAULT_QUEUE) == 2
    assert value(samples, "jobs_queue_depth", queue="reports") == 1
    assert value(samples, "jobs_scheduler_leader", node="node-a") == 1
    assert before_tick <= value(samples, "jobs_scheduler_last_tick_timestamp_seconds") <= time.time()


@POSTGRES
def test_it_asks_for_the_bearer_token_when_one_is_set(db, client, settings):
    settings.METRICS_TOKEN = "s3cret-token"

    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token", REMOTE_ADDR="203.0.113.9").status_code == 200


@POSTGRES
def test_it_answers_only_allowed_addresses_without_a_token(db, client, open_metrics):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401

    open_metrics.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401


@POSTGRES
def test_it_scrapes_fifty_jobs_with_a_fixed_number_of_queries(db, client, redis_client, open_metrics,
                                                              django_assert_max_num_queries):
    for i in range(50):
        job = make_job(f"job-{i:02d}", queue=f"q{i % 5}")
        add_run(job, RunStatus.SUCCEEDED, 30, lag=0.5, duration=1)
        add_run(job, RunStatus.RUNNING, 10, attempts=("running",))

    with django_assert_max_num_queries(13):  # the leader lease is one of them
        samples = scrape(client)

    assert sum(value(samples, "jobs_runs_finished_total", job=f"job-{i:02d}", status="succeeded")
               for i in range(50)) == 50
    assert value(samples, "jobs_runs", status="running") == 50
    assert value(samples, "jobs_queue_depth", queue="q4") == 0


def test_it_shows_runs_of_the_real_pipeline_and_the_leading_scheduler(processes, client, open_metrics):
    ok = make_job("metrics-ok")
    failing = make_job("metrics-fails", target="builtin.fail")
    processes.worker()
    processes.beat(name="beat-m")
    started = time.time()

    made = [lifecycle.create_run(ok), lifecycle.create_run(ok), lifecycle.create_run(failing)]
    wait_for(lambda: all(JobRun.objects.get(pk=r.pk).status in ("succeeded", "failed") for r in made),
             timeout=40, message="the runs to finish")
    wait_for(lambda: value(scrape(client), "jobs_scheduler_leader", node="beat-m"), timeout=30,
             message="the scheduler to lead")

    samples = scrape(client)
    assert value(samples, "jobs_runs_finished_total", job="metrics-ok", status="succeeded") == 2
    assert value(samples, "jobs_runs_finished_total", job="metrics-fails", status="failed") == 1
    assert value(samples, "jobs_run_duration_seconds_count", job="metrics-ok") == 2
    assert value(samples, "jobs_dispatch_lag_seconds_count") == 3
    assert value(samples, "jobs_runs", status="running") == 0
    assert value(samples, "jobs_scheduler_last_tick_timestamp_seconds") >= started


def test_it_serves_what_the_database_can_on_sqlite_and_postgresql(db, client, redis_client, open_metrics):
    # The quick start's SQLite gets the portable families; PostgreSQL all of them (both passes run this).
    from django.db import connection

    job = make_job("metrics-portable")
    add_run(job, "succeeded", 60, duration=2.0, attempts=("failed", "succeeded"))
    JobRun.objects.create(job=job, status=RunStatus.QUEUED, scheduled_for=timezone.now())
    samples = scrape(client, REMOTE_ADDR="127.0.0.1")
    assert value(samples, "jobs_runs", status="queued") == 1
    assert value(samples, "jobs_retries_total") == 1
    assert value(samples, "jobs_notification_deliveries", status="sent") == 0
    assert ((value(samples, "jobs_run_duration_seconds_count", job="metrics-portable") == 1)
            == (connection.vendor == "postgresql"))
