"""Messages per second of the scheduler's publishing on plain Redis: kombu's producer batch against
the hand-built fast path (jobs/execution/publishing.py), and Celery's ``send_task`` one message at a time.

    REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python bench/publishing.py --messages 20000 --rounds 5

Publishes to a queue of its own (``bench-publishing``), which it deletes before and after each round.
The fast path stays only while it is measurably faster than the producer batch.
"""

import statistics
import time

import benchenv

benchenv.setup(DATABASE_URL="sqlite:///:memory:")

from celery import current_app  # noqa: E402

from jobs.execution import publishing  # noqa: E402

QUEUE = "bench-publishing"


def rate(send, messages):
    depth = publishing.queue_depth([QUEUE])[QUEUE]
    assert depth == 0, f"{QUEUE} holds {depth} messages before the round"
    started = time.perf_counter()
    send(messages)
    seconds = time.perf_counter() - started
    depth = publishing.queue_depth([QUEUE])[QUEUE]
    assert depth == len(messages), f"{depth} of {len(messages)} messages arrived"
    purge()
    return len(messages) / seconds


def purge():
    with current_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(QUEUE)


def main():
    args = benchenv.arguments(__doc__, messages=20000, rounds=5)
    app = current_app._get_current_object()
    if app.connection_for_write().transport_cls not in ("redis", "rediss"):
        raise SystemExit("the fast path exists for plain Redis only: point REDIS_URL or CELERY_BROKER_URL at one")
    messages = [publishing.Message(i, 1, QUEUE, 100.0, 90.0) for i in range(args.messages)]
    fast, kombu = publishing.Publisher(app, fast_path=True), publishing.Publisher(app, fast_path=False)
    ways = {
        "hand-built pipeline": lambda m: fast.send(m),
        "kombu producer batch": lambda m: [kombu.send(m[i:i + 1000]) for i in range(0, len(m), 1000)],
        "send_task, one by one": lambda m: [publishing.send_one(one) for one in m],
    }
    purge()
    rates = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, send in ways.items():
            some = messages if name != "send_task, one by one" else messages[:max(1, len(messages) // 10)]
            rates[name].append(rate(send, some))
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name:24} {median:10,.0f} msg/s  {1e6 / median:6.1f} µs/msg  (median of {len(values)})")


if __name__ == "__main__":
    main()
