"""The scheduler's batched messages are the messages Celery's send_task sends, on every broker
(jobs/execution/publishing.py), and the queue depth is what the broker holds."""

import base64
import json
import re
import time

import pytest
import redis
from celery import current_app
from kombu import Exchange, Queue

from jobs import lifecycle
from jobs.execution import publishing
from jobs.models import Job

QUEUE = "wire-test"


def received():
    """Every message waiting on QUEUE, oldest first, as kombu hands it to a worker; the per-message
    delivery tag set aside."""
    messages = []
    with current_app.connection_for_read() as connection:
        queue = current_app.amqp.queues[QUEUE].bind(connection.default_channel)
        while (message := queue.get(no_ack=True)) is not None:
            properties = dict(message.properties)
            properties.pop("delivery_tag", None)
            messages.append({"headers": message.headers, "properties": properties, "body": json.loads(message.body),
                             "content_type": message.content_type, "content_encoding": message.content_encoding})
    return messages


def redis_list(kombu_priority):
    """The Redis list kombu's transport keeps messages of this priority in (its ``_q_for_pri``: the
    queue, then "\x06\x16" and the step, the step 0 being the bare queue), our 10 steps."""
    return QUEUE if kombu_priority == 0 else f"{QUEUE}\x06\x16{kombu_priority}"


def stored_on_redis(client, kombu_priority=4):
    """Messages on the test queue's list of one priority on a plain Redis, oldest first, exactly as
    stored (the fast path writes these bytes itself), the delivery tag set aside; no other list holds any."""
    key = redis_list(kombu_priority)
    messages = [json.loads(raw) for raw in reversed(client.lrange(key, 0, -1))]
    for message in messages:
        assert message["properties"].pop("delivery_tag")
        message["body"] = json.loads(base64.b64decode(message["body"]))
    client.delete(key)
    assert not any(client.llen(redis_list(step)) for step in range(10))
    return messages


def ways_to_publish(broker):
    """(name, send) for each path the broker's messages can take."""
    app = current_app._get_current_object()
    if broker.kind != "redis":
        return [("kombu", publishing.publish)]
    return [("fast path", publishing.Publisher(app, fast_path=True).send),
            ("kombu batch", publishing.Publisher(app, fast_path=False).send)]


def sent_each_way(broker, message, read=received):
    """What each way of ``ways_to_publish`` puts on the wire for ``message`` (as ``read`` finds the
    two), each checked to be what Celery's send_task puts there."""
    sent = []
    for way, send in ways_to_publish(broker):
        publishing.send_one(message)  # Celery's send_task
        send([message])
        by_celery, by_batch = read()
        assert by_batch == by_celery, way
        sent.append(by_batch)
    return sent


def wire_job(kind="callable"):
    return Job(name="wire", kind=kind, target="x", timeout_seconds=30, queue=QUEUE)


@pytest.mark.parametrize("kind", ["callable", "command"])
def test_a_batched_message_is_the_message_celery_sends(broker, kind):
    message = lifecycle.message_for(41, 3, wire_job(kind))

    for by_batch in sent_each_way(broker, message):
        assert by_batch["headers"]["id"] == "run-41-3"
        assert by_batch["headers"]["task"] == "jobs.execute_run"
        assert by_batch["body"][0] == [41, 3]
        assert by_batch["headers"]["timelimit"][1] == (30 if kind == "callable" else None)


@pytest.mark.brokers("redis", "rabbitmq")
def test_a_bundle_is_the_message_celery_sends(broker):
    bundle = publishing.Bundle(((41, 3), (42, 1)), QUEUE, 95.0, None, 7)

    for by_batch in sent_each_way(broker, bundle):
        assert by_batch["headers"]["id"] == "bundle-41-3-2"
        assert by_batch["headers"]["task"] == "jobs.execute_bundle"
        assert by_batch["body"][0] == [[[41, 3], [42, 1]]]
        assert by_batch["headers"]["timelimit"] == [95.0, None]


@pytest.mark.brokers("redis")
@pytest.mark.parametrize("priority", [0, 5, 9])
def test_the_fast_path_stores_the_bytes_kombu_stores(broker, priority):
    client = redis.Redis.from_url(broker.url)
    job = wire_job()
    job.priority = priority
    message = lifecycle.message_for(7, 1, job)

    # kombu's Redis transport pops lower numbers first: a job's 9 (most urgent) is its 0.
    for by_batch in sent_each_way(broker, message, read=lambda: stored_on_redis(client, kombu_priority=9 - priority)):
        assert by_batch["properties"]["priority"] == 9 - priority


def test_a_batch_keeps_its_order_and_every_message(broker):
    job = wire_job()
    if broker.kind == "sentinel":  # kombu pipelines the batch (it would not if redis-py could replay it)
        assert publishing.Publisher(current_app._get_current_object()).producer.supports_batch_publish

    lifecycle.publish_many([(run_id, 1, job) for run_id in range(1, 2501)])

    assert publishing.queue_depth([QUEUE]) == {QUEUE: 2500}
    assert [m["body"][0] for m in received()] == [[run_id, 1] for run_id in range(1, 2501)]


def test_the_queue_depth_is_what_the_broker_holds(broker):
    job = wire_job()
    assert publishing.queue_depth([QUEUE, "never-used"]) == {QUEUE: 0, "never-used": 0}

    lifecycle.publish_many([(run_id, 1, job) for run_id in range(1, 4)])
    assert publishing.queue_depth([QUEUE, "never-used"]) == {QUEUE: 3, "never-used": 0}

    broker.stop()
    assert publishing.queue_depth([QUEUE]) == {QUEUE: None}


@pytest.mark.brokers("rabbitmq")
def test_a_message_rabbitmq_refuses_fails_the_batch(broker):
    # A (classic) queue that holds one message and refuses more (x-overflow reject-publish): the
    # broker answers with nacks, collected with the batch's confirms.
    with current_app.connection_for_write() as connection:
        connection.default_channel.queue_delete("full")  # from an earlier test of this session
        Queue("full", Exchange("full"), "full", queue_arguments={
            "x-max-length": 1, "x-overflow": "reject-publish"}).bind(
            connection.default_channel).declare()
    publisher = publishing.Publisher(current_app._get_current_object())
    publisher.declared.add("full")  # declared above, with its limit
    job = Job(name="wire", kind="callable", target="x", timeout_seconds=30, queue="full")

    with pytest.raises(publishing.PublishError, match=r"the broker refused (\d+) message") as refused:
        publisher.send([lifecycle.message_for(run_id, 1, job) for run_id in range(1, 6)])
    # The queue takes one and refuses four. RabbitMQ may refuse several with one nack (``multiple``):
    # a count of the nacks said 3 in a CI run.
    assert publishing.queue_depth(["full"]) == {"full": 1}
    assert int(re.search(r"refused (\d+)", str(refused.value)).group(1)) == 4


def test_a_batch_after_the_broker_restarted_is_sent_on_a_new_connection(broker):
    job = wire_job()
    lifecycle.publish_many([(1, 1, job)])
    if broker.kind == "rabbitmq":
        # RabbitMQ 3.10 can lose the leader of a quorum queue killed within a moment of its
        # creation (it never elects one after the restart); a queue a worker declared at its start
        # is seconds old. Not an assert on time: a settling pause before the fault.
        time.sleep(2)

    broker.fault()  # Redis restarts empty, Sentinel fails over, RabbitMQ restarts with its queues
    lifecycle.publish_many([(2, 1, job)])

    bodies = [m["body"][0] for m in received()]
    assert bodies[-1] == [2, 1]
    assert bodies in ([[2, 1]], [[1, 1], [2, 1]])  # the first survives where the broker keeps it
