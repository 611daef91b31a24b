"""Every beat killed: the workers' watchdog alerts through a webhook that the scheduler is down, and
that it recovered once a beat ticks again (jobs/worker/watchdog.py)."""

import signal
import time

import pytest
from django.conf import settings

from jobs.coordination import leases
from notifications.models import Channel, Rule

from ..conftest import wait_for
from ..test_notifications_support import RecordingHTTPServer
from .conftest import wait_for_leader

pytestmark = pytest.mark.brokers("redis")

STALE_SECONDS = 3
# The stated time: the stale period, a watchdog pass (0.75 s here) and the sending of the webhook
# by a worker, with room for a loaded machine. The recovery: a beat's start and first tick, the same.
ALERT_WITHIN = STALE_SECONDS + 12
RECOVERED_WITHIN = 20


def events_received(server):
    return [body["event"] for body in server.json_bodies()]


@pytest.mark.timeout(90)
def test_killing_every_beat_alerts_once_and_a_new_beat_sends_the_recovery(processes, local_http_allowed):
    with RecordingHTTPServer() as server:
        channel = Channel.objects.create(name="ops", kind="webhook", config={"url": server.url + "/hook"})
        Rule.objects.create(channel=channel, events=["scheduler_down"])
        timings = {"JOBS_SCHEDULER_STALE_SECONDS": STALE_SECONDS}
        processes.worker(name="wa", **timings)
        processes.worker(name="wb", **timings)
        beats = [processes.beat(name="ba", **timings), processes.beat(name="bb", **timings)]
        wait_for_leader()
        wait_for(lambda: (leases.state(settings.JOBS_LEADER_KEY) or {}).get("last_tick_at"), message="a tick")

        for beat in beats:
            processes.kill(beat, signal.SIGKILL, group=False)  # by its PID
        killed_at = time.monotonic()
        wait_for(lambda: "scheduler_down" in events_received(server), timeout=ALERT_WITHIN,
                 message="the scheduler_down webhook")
        alerted_after = time.monotonic() - killed_at

        processes.beat(name="bc", **timings)
        started_at = time.monotonic()
        wait_for(lambda: "scheduler_recovered" in events_received(server), timeout=RECOVERED_WITHIN,
                 message="the scheduler_recovered webhook")
        recovered_after = time.monotonic() - started_at

        assert events_received(server) == ["scheduler_down", "scheduler_recovered"]
        down, recovered = server.json_bodies()
        assert down["scheduler"]["last_tick_at"] is not None
        assert recovered["scheduler"]["recovered_at"] is not None
        print(f"\nCHAOS every beat killed: scheduler_down after {alerted_after:.1f} s "
              f"(stale after {STALE_SECONDS} s), scheduler_recovered {recovered_after:.1f} s after a beat started")
