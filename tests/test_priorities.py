"""A job's priority (0-9, 9 the most urgent): validated where a job is written, and honoured by the
broker, so that of a backlog a worker starts the urgent runs first."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, RunStatus

from .brokers import use
from .conftest import Processes, wait_for

# On RabbitMQ, a queue of its own: the session's node holds the default queue as a quorum queue.
RABBITMQ_QUEUE = "priorities"


def ledger_job(name, priority, ledger, queue=""):
    return save_job(Job(name=name, kind="callable", target="test.ledger", kwargs={"path": ledger.path},
                        priority=priority, queue=queue), {"type": "manual"})


@pytest.mark.redis_only("RabbitMQ orders by priority only in priority queues (JOBS_RABBITMQ_PRIORITY_QUEUES): "
                        "the test below")
def test_a_backlog_starts_its_urgent_runs_first(processes, ledger):
    start_backlog_and_check(lambda: processes.worker(concurrency=1), ledger)


@pytest.mark.brokers("rabbitmq")
@pytest.mark.postgres("starts a worker, which shares the test database (a SQLite one is the test's own)")
def test_on_rabbitmq_priority_queues_start_the_urgent_runs_first(broker, settings, transactional_db, tmp_path,
                                                                 ledger):
    undo = use(broker, settings, priority_queues=True)  # JOBS_RABBITMQ_PRIORITY_QUEUES in this process
    processes = Processes(tmp_path, {**broker.env, "JOBS_RABBITMQ_PRIORITY_QUEUES": "true"})
    try:
        start_backlog_and_check(lambda: processes.worker(concurrency=1, queues=RABBITMQ_QUEUE), ledger,
                                queue=RABBITMQ_QUEUE)
    finally:
        processes.stop_all()
        broker.queues_seen.add(RABBITMQ_QUEUE)  # emptied after the test
        undo()


def start_backlog_and_check(start_worker, ledger, queue=""):
    """Twenty runs of a job of priority 0 wait in the broker, then three of priority 9; one worker
    with one process starts: the three start first."""
    low, high = ledger_job("low", 0, ledger, queue), ledger_job("high", 9, ledger, queue)
    lows = [lifecycle.create_run(low) for _ in range(20)]  # no worker runs yet: they wait in the broker
    highs = [lifecycle.create_run(high) for _ in range(3)]

    start_worker()

    def runs():
        return list(low.runs.all()) + list(high.runs.all())

    wait_for(lambda: all(run.status == RunStatus.SUCCEEDED for run in runs()), timeout=60,
             message="the 23 runs to succeed")

    started = sorted(runs(), key=lambda run: run.started_at)
    order = ["high" if run.job_id == high.pk else "low" for run in started]
    assert order == ["high"] * len(highs) + ["low"] * len(lows), order


@pytest.mark.django_db
def test_a_priority_outside_0_to_9_is_refused_naming_the_field(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    job = {"name": "urgent", "kind": "callable", "target": "test.ledger", "kwargs": {"path": "/tmp/x"},
           "schedule": {"type": "manual"}}

    refused = client.post("/api/jobs/", {**job, "priority": 10}, format="json")
    assert refused.status_code == 400
    assert "priority" in refused.json()

    made = client.post("/api/jobs/", job, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["priority"] == 5  # the default: room above and below
    changed = client.patch(f"/api/jobs/{made.json()['id']}/", {"priority": 9}, format="json")
    assert changed.json()["priority"] == 9
    assert Job.objects.get(name="urgent").priority == 9

    client.force_login(admin_user)  # the pages show it: the jobs list and the job page
    assert '<td class="priority">9</td>' in client.get("/jobs/").content.decode()
    assert "<dt>Priority</dt><dd" in client.get(f"/jobs/{made.json()['id']}/").content.decode()


@pytest.mark.django_db
def test_jobs_as_code_sets_a_priority_and_names_a_bad_one(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n- name: urgent\n  kind: callable\n  target: builtin.noop\n  schedule:\n"
                    "    type: manual\n  priority: 9\n")
    call_command("jobs", "apply", str(path), stdout=StringIO())
    assert Job.objects.get(name="urgent").priority == 9
    exported = StringIO()
    call_command("jobs", "export", "-", stdout=exported)
    assert "priority: 9" in exported.getvalue()

    path.write_text(path.read_text().replace("priority: 9", "priority: 12"))
    with pytest.raises(CommandError) as error:
        call_command("jobs", "apply", str(path), stdout=StringIO())
    assert "line 2: jobs[0] (name: urgent): priority: Ensure this value is less than or equal to 9." in str(
        error.value)
