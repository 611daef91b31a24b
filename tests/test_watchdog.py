"""The workers' scheduler watchdog (jobs/worker/watchdog.py): when no scheduler ticks, one worker at a
time raises one scheduler_down alert per outage, and a scheduler_recovered notice when one ticks again."""

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from jobs.coordination import leases
from jobs.models import Lease, SchedulerOutage
from jobs.timing import clock
from jobs.worker import watchdog
from jobs.worker.watchdog import DOWN, OK, RECOVERED, STALE, STANDBY, Watchdog
from notifications import render
from notifications.channels import email, slack, webhook
from notifications.models import Channel, Delivery, Rule

pytestmark = pytest.mark.django_db

STALE_AFTER = 30


@pytest.fixture(autouse=True)
def short_stale(settings):
    settings.JOBS_SCHEDULER_STALE_SECONDS = STALE_AFTER


def last_tick(seconds_ago):
    """The leader lease as a scheduler leaves it: its last tick ``seconds_ago`` on the database's clock."""
    at = clock.now() - timedelta(seconds=seconds_ago)
    Lease.objects.update_or_create(name=settings.JOBS_LEADER_KEY, defaults={
        "holder": "beat-a", "epoch": 1, "expires_at": at + timedelta(seconds=5), "last_tick_at": at})
    return at


def alert_rule(events=("scheduler_down",), name="ops"):
    channel = Channel.objects.create(name=name, kind="webhook", config={"url": "https://hooks.example.com/x"})
    Rule.objects.create(channel=channel, events=list(events))
    return channel


def deliveries(event):
    return list(Delivery.objects.filter(event=event).values_list("channel__name", flat=True).order_by("channel__name"))


def test_a_scheduler_that_ticked_within_the_stale_time_raises_nothing():
    alert_rule()
    last_tick(STALE_AFTER - 5)

    assert Watchdog("w1").check() == OK
    assert not SchedulerOutage.objects.exists()
    assert deliveries("scheduler_down") == []


def test_no_tick_for_the_stale_time_alerts_once_per_outage():
    channel = alert_rule()
    alert_rule(events=("failed",), name="failures only")
    ticked = last_tick(STALE_AFTER + 5)
    dog = Watchdog("w1")

    assert [dog.check(), dog.check(), dog.check()] == [DOWN, STALE, STALE]

    assert deliveries("scheduler_down") == ["ops"]
    outage = SchedulerOutage.objects.get()
    assert (outage.last_tick_at, outage.noticed_by, outage.recovered_at) == (ticked, "w1", None)
    body = webhook.body_for(Delivery.objects.get(channel=channel))
    assert body["event"] == "scheduler_down"
    assert body["scheduler"]["last_tick_at"] == ticked.isoformat()
    assert render.headline(Delivery.objects.get().payload).startswith(
        f"Scheduler down: no scheduler has ticked since {ticked.isoformat()}")


def test_one_worker_at_a_time_judges_and_a_standby_takes_over_without_alerting_again():
    alert_rule()
    last_tick(STALE_AFTER + 5)
    first, second = Watchdog("w1"), Watchdog("w2")

    assert [first.check(), second.check()] == [DOWN, STANDBY]
    first.release()  # the first worker stopped: its lease is free at once
    assert second.check() == STALE

    assert deliveries("scheduler_down") == ["ops"]
    assert SchedulerOutage.objects.count() == 1


def test_a_tick_again_closes_the_outage_and_tells_the_channels_that_heard_of_it():
    alert_rule()
    dog = Watchdog("w1")
    last_tick(STALE_AFTER + 5)
    assert dog.check() == DOWN
    alert_rule(name="added later")  # told nothing of the outage: not told of its end either

    last_tick(0)
    assert [dog.check(), dog.check()] == [RECOVERED, OK]

    assert deliveries("scheduler_recovered") == ["ops"]
    outage = SchedulerOutage.objects.get()
    assert outage.recovered_at is not None
    assert render.headline(Delivery.objects.get(event="scheduler_recovered").payload).startswith(
        "Scheduler recovered at")

    last_tick(STALE_AFTER + 5)  # a second outage: alerted again, to every rule taking it
    assert dog.check() == DOWN
    assert deliveries("scheduler_down") == ["added later", "ops", "ops"]


def test_a_scheduler_that_never_ticked_gets_the_stale_time_from_the_first_look(monkeypatch):
    alert_rule()
    dog = Watchdog("w1")
    assert dog.check() == OK  # a new deployment: its beat may still be starting

    dog.first_pass_at -= timedelta(seconds=STALE_AFTER + 1)
    assert dog.check() == DOWN
    assert SchedulerOutage.objects.get().last_tick_at is None
    assert "no scheduler has ticked ever" in render.headline(Delivery.objects.get().payload)

    restarted = Watchdog("w1")  # the worker restarts while no scheduler ever ticked: still down
    dog.release()
    assert restarted.check() == STALE


def test_a_holder_replaced_while_paused_cannot_alert(monkeypatch):
    alert_rule()
    last_tick(STALE_AFTER + 5)
    paused = Watchdog("w1")
    paused.held = leases.take(watchdog.LEASE_KEY, "w1", 10)
    Lease.objects.filter(name=watchdog.LEASE_KEY).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Watchdog("w2").check() == DOWN  # took the expired lease
    SchedulerOutage.objects.update(recovered_at=timezone.now())  # as if it were over

    # Paused past its lease, the first holder wakes believing it still holds it (a renewal it
    # skipped would have told it otherwise): the fence on its epoch stops it.
    monkeypatch.setattr(leases, "renew", lambda held, ttl: True)
    with pytest.raises(leases.LeaseLost):
        paused.check()
    assert SchedulerOutage.objects.count() == 1


def test_the_status_command_and_the_overview_say_the_scheduler_is_stale_and_since_when(admin_client):
    ticked = last_tick(STALE_AFTER + 5)
    Watchdog("w1").check()

    out = StringIO()
    call_command("scheduler", "status", stdout=out)
    assert f"scheduler: stale: no tick since {ticked:%Y-%m-%d %H:%M:%S}" in out.getvalue()
    assert "outage: noticed at" in out.getvalue()

    page = admin_client.get("/").content.decode()
    assert "scheduler-stale" in page and f"no tick since {ticked:%Y-%m-%d %H:%M:%S}" in page


def test_the_email_and_slack_messages_say_when_the_scheduler_last_ticked():
    channel = Channel.objects.create(name="mail", kind="email", config={"recipients": ["ops@example.com"]})
    Rule.objects.create(channel=channel, events=["scheduler_down"])
    ticked = last_tick(STALE_AFTER + 5)
    Watchdog("w1").check()

    delivery = Delivery.objects.get(channel=channel)
    text = email.CHANNEL.render(delivery).text
    slack_text = slack.CHANNEL.render(delivery)
    assert f"Last tick: {ticked.isoformat()}" in text and "Noticed:" in text and "by w1" in text
    assert "Job:" not in text  # no run to describe
    assert slack_text.startswith("*Scheduler down: no scheduler has ticked since") and "by w1" in slack_text
