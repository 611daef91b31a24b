"""Check-in pings through the queue while the scheduler leader that records them is killed (SIGKILL),
again and again, with a backlog waiting: every ping the web answered 200 is recorded, once. The
expected records are the test's own ledger: the body it sent with each ping answered 200."""

import http.client
import threading
import time

import pytest

from jobs.definitions.jobs import save_job
from jobs.lifecycle import ping_queue
from jobs.models import Job, JobRun

from ..cli_support import Web
from ..conftest import wait_for
from .conftest import wait_for_leader

# The queue is in Redis whatever the broker: the broker plays no part in these faults.
pytestmark = pytest.mark.brokers("redis")

KILLS = 4
SENDERS = 4
AT_THREE = {"type": "cron", "cron": "0 3 * * *", "timezone": "UTC"}  # no slot now: each ping a run of its own


def send_pings(url, keys, stop, ledger):
    """Ping ``keys`` round-robin until ``stop``, each with a body of its own; ``ledger``: the bodies
    answered 200."""
    host, port = url.removeprefix("http://").split(":")
    conn, n = http.client.HTTPConnection(host, int(port), timeout=10), 0
    while not stop.is_set():
        body = f"ping {n}"
        try:
            conn.request("POST", f"/ping/{keys[n % len(keys)]}", body=body)
            answer = conn.getresponse()
            answer.read()
            if answer.status == 200:
                ledger.append(body)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
        n += 1


def test_pings_answered_while_the_leader_is_killed_are_each_recorded_once(processes, redis_client, tmp_path):
    keys = [str(save_job(Job(name=f"box-{n}", kind="checkin", target="box", grace_seconds=3600), AT_THREE).ping_key)
            for n in range(50)]
    web = Web(tmp_path, JOBS_PING_RATE_PER_URL="0", JOBS_PING_RATE_PER_ADDRESS="0")
    try:
        web.wait_until_up()
        beats = {name: processes.beat(name=name) for name in ("ba", "bb")}
        leader = wait_for_leader()
        stop, ledger = threading.Event(), []
        senders = [threading.Thread(target=send_pings, args=(web.url, keys[i::SENDERS], stop, ledger)) for i in range(SENDERS)]
        for sender in senders:
            sender.start()
        waiting_at_kills = []
        try:
            for kill in range(KILLS):
                # Soon after it took over: it is still recording the pings that waited for a leader.
                time.sleep(0.3)
                waiting_at_kills.append(ping_queue.current().waiting())
                processes.kill(beats.pop(leader))
                beats[f"b{kill}"] = processes.beat(name=f"b{kill}")  # a standby again
                leader = wait_for_leader(timeout=30, other_than=leader)
        finally:
            stop.set()
            for sender in senders:
                sender.join(timeout=30)

        wait_for(lambda: ping_queue.current().waiting() == 0 and JobRun.objects.count() >= len(ledger), timeout=90,
                 message="the leader recording every ping answered")
        time.sleep(1)  # a second recording of any of them would show now
    finally:
        web.stop()
    recorded = sorted(JobRun.objects.values_list("output", flat=True))
    assert len(ledger) > 500 and recorded == sorted(ledger)
    # Killed with pings waiting: a leader died with a backlog for the next to record.
    assert max(waiting_at_kills) > 0, waiting_at_kills
