"""With RabbitMQ as the broker the service needs no Redis at all: worker and beat started with only
CELERY_BROKER_URL=amqp://... and DATABASE_URL (REDIS_URL pointing at a closed port) run scheduled
and manual jobs end to end, and the pages and metrics read the leader and the queue depth. Only the
queue of check-in pings looks for a Redis at REDIS_URL (a deployment with none leaves it unset), and
a queue out of reach costs the scheduler one warning."""

import socket

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .conftest import Processes, wait_for


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.mark.brokers("rabbitmq")
@pytest.mark.timeout(180)
def test_worker_and_beat_run_jobs_on_rabbitmq_with_no_redis(broker, transactional_db, ledger, tmp_path, request,
                                                             settings):
    no_redis = f"redis://127.0.0.1:{closed_port()}/0"
    processes = Processes(tmp_path, {**broker.env, "REDIS_URL": no_redis})
    request.addfinalizer(processes.stop_all)
    scheduled = save_job(Job(name="on-rabbit", kind="callable", target="test.ledger", kwargs={"path": ledger.path}),
                         {"type": "interval", "every_seconds": 1})
    manual = save_job(Job(name="rabbit-now", kind="callable", target="test.ledger", kwargs={"path": ledger.path}),
                      {"type": "manual"})
    processes.worker()
    processes.beat(name="rabbit-beat")

    wait_for(lambda: scheduled.runs.filter(status=RunStatus.SUCCEEDED).count() >= 3, timeout=60,
             message="three scheduled runs succeeded")
    run = lifecycle.create_run(manual)
    wait_for(lambda: manual.runs.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=30,
             message="the manual run to succeed")

    succeeded = {f"{r.pk}:1" for r in scheduled.runs.filter(status=RunStatus.SUCCEEDED)} | {f"{run.pk}:1"}
    assert succeeded <= {line[1] for line in ledger.lines("end")}
    assert f"{settings.JOBS_DEFAULT_QUEUE}\tquorum" in broker.ctl("list_queues", "name", "type", "--quiet")
    # Nothing tried the closed Redis port but the queue of check-in pings (REDIS_URL is its home: a
    # deployment with no Redis leaves it unset), and that said so once, not each tick.
    refused = [line for line in processes.logs().splitlines() if "Connection refused" in line]
    assert len(refused) == 1 and "the queue of pings is out of reach" in refused[0], refused

    staff = User.objects.create_user("ops", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    overview = client.get("/").text
    assert "rabbit-beat" in overview
    assert 'class="queue-depth">0<' in overview
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = "", ["127.0.0.1"]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(client.get("/metrics").content.decode())
               for s in family.samples}
    assert samples[("jobs_scheduler_leader", (("node", "rabbit-beat"),))] == 1
    assert samples[("jobs_queue_depth", (("queue", settings.JOBS_DEFAULT_QUEUE),))] == 0
