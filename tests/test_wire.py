"""The scheduler's batched messages are the messages apply_async sends (jobs/wire.py)."""

import base64
import json

import pytest

from jobs import runs
from jobs.models import Job

QUEUE = "wire-test"


def sent_messages(redis_client):
    """Messages on the test queue, oldest first, with the per-message delivery tag set aside."""
    messages = [json.loads(raw) for raw in reversed(redis_client.lrange(QUEUE, 0, -1))]
    for message in messages:
        assert message["properties"].pop("delivery_tag")
        message["body"] = json.loads(base64.b64decode(message["body"]))
    return messages


@pytest.mark.parametrize("kind", ["callable", "command"])
def test_a_batched_message_is_the_message_apply_async_sends(redis_client, kind):
    job = Job(name="wire", kind=kind, target="x", timeout_seconds=30, queue=QUEUE)

    runs.publish(41, 3, job)  # Celery's apply_async
    runs.publish_many([(41, 3, job)])  # the scheduler's batch

    by_celery, by_batch = sent_messages(redis_client)
    assert by_batch == by_celery
    assert by_batch["headers"]["id"] == "run-41-3"
    assert by_batch["body"][0] == [41, 3]
    assert by_batch["headers"]["timelimit"][1] == (30 if kind == "callable" else None)


def test_a_batch_keeps_its_order_and_every_message(redis_client):
    job = Job(name="wire", kind="callable", target="x", timeout_seconds=30, queue=QUEUE)

    runs.publish_many([(run_id, 1, job) for run_id in range(1, 2501)])

    assert [m["body"][0] for m in sent_messages(redis_client)] == [[run_id, 1] for run_id in range(1, 2501)]
