"""Run events into deliveries: incidents, SLA overruns and their follow-ups, missed slots, rule
scopes, and the whole pipeline with a real worker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.models import JobRun, RunStatus
from notifications import watch
from notifications.models import Delivery, DeliveryStatus
from notifications.outbox import record_event

from .conftest import wait_for
from .test_notifications_support import (
    RecordingHTTPServer,
    channel_with_rule,
    make_job,
    make_run,
    send_pending,
)


@pytest.fixture
def http_server(local_http_allowed):
    with RecordingHTTPServer() as server:
        yield server


def events_sent(server):
    return [body["event"] for body in server.json_bodies()]


@pytest.mark.django_db
def test_it_sends_one_failure_and_one_recovery_alert_per_incident(http_server):
    channel_with_rule("webhook", {"url": http_server.url}, ["failed", "timed_out", "recovered"])
    job = make_job()
    for timed_out in (False, True):
        run = make_run(job)
        lifecycle.record_failure(run.pk, 1, "boom", timed_out=timed_out)
        send_pending()
    lifecycle.record_success(make_run(job).pk, 1)
    send_pending()

    assert events_sent(http_server) == ["failed", "recovered"]
    assert Delivery.objects.get(event="timed_out").status == DeliveryStatus.SUPPRESSED

    lifecycle.record_failure(make_run(job).pk, 1, "boom again")  # a new incident
    send_pending()
    assert events_sent(http_server) == ["failed", "recovered", "failed"]


@pytest.mark.django_db
def test_it_alerts_attempt_failures_and_successes_only_when_a_rule_asks(http_server):
    channel_with_rule("webhook", {"url": http_server.url}, ["failed"])
    job = make_job()
    run = make_run(job, max_attempts=2)
    lifecycle.record_failure(run.pk, 1, "first try failed")
    JobRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, attempt=2)
    lifecycle.record_success(run.pk, 2)
    assert not Delivery.objects.exists()

    channel_with_rule("webhook", {"url": http_server.url}, ["attempt_failed", "succeeded"], name="chatty")
    run = make_run(job, max_attempts=2)
    lifecycle.record_failure(run.pk, 1, "first try failed")
    JobRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, attempt=2)
    lifecycle.record_success(run.pk, 2)
    send_pending()
    assert events_sent(http_server) == ["attempt_failed", "succeeded"]


@pytest.mark.django_db
def test_it_alerts_only_the_rules_whose_scope_matches():
    nightly = make_job("nightly", tags=["reports"])
    other = make_job("other")
    all_jobs = channel_with_rule("slack", {"url": "http://127.0.0.1:9/a"}, ["failed"], name="all")
    tagged = channel_with_rule("slack", {"url": "http://127.0.0.1:9/b"}, ["failed"], name="tag",
                               scope="tag", tag="reports")
    one = channel_with_rule("slack", {"url": "http://127.0.0.1:9/c"}, ["failed"], name="one",
                            scope="job", job=other)

    record_event(make_run(nightly, status=RunStatus.FAILED), "failed")
    record_event(make_run(other, status=RunStatus.FAILED), "failed")

    by_job = {(d.job.name, d.channel_id) for d in Delivery.objects.select_related("job")}
    assert by_job == {("nightly", all_jobs.pk), ("nightly", tagged.pk), ("other", all_jobs.pk), ("other", one.pk)}


@pytest.mark.django_db
def test_it_alerts_an_sla_overrun_once_and_follows_up_when_the_run_ends(http_server):
    channel_with_rule("webhook", {"url": http_server.url}, ["sla_overrun"])
    job = make_job(sla_seconds=60)
    started = timezone.now() - timedelta(seconds=90)
    run = make_run(job, started_at=started)
    on_time = make_run(make_job("quick", sla_seconds=600), started_at=started)

    assert watch.check(now=started + timedelta(seconds=30))["sla_overrun"] == 0
    assert watch.check()["sla_overrun"] == 1
    assert watch.check()["sla_overrun"] == 0
    send_pending()
    assert events_sent(http_server) == ["sla_overrun"]
    overrun = Delivery.objects.get(event="sla_overrun")
    assert overrun.run == run and on_time.pk != run.pk

    assert watch.check()["finished_late"] == 0  # still running
    lifecycle.record_success(run.pk, 1)
    assert watch.check()["finished_late"] == 1
    assert watch.check()["finished_late"] == 0
    send_pending()
    assert events_sent(http_server) == ["sla_overrun", "finished_late"]
    assert http_server.json_bodies()[1]["run"]["status"] == "succeeded"


@pytest.mark.django_db
def test_it_writes_a_readable_sla_message(http_server):
    channel_with_rule("slack", {"url": http_server.url}, ["sla_overrun"])
    make_run(make_job(sla_seconds=60), started_at=timezone.now() - timedelta(seconds=90))

    watch.check()
    send_pending()
    [post] = http_server.json_bodies()
    assert "nightly-report is still running after 90 s, expected 60 s" in post["text"]


@pytest.mark.django_db
def test_it_alerts_a_missed_slot_once(http_server):
    channel_with_rule("webhook", {"url": http_server.url}, ["missed"])
    job = make_job()
    missed = make_run(job, status=RunStatus.SKIPPED, started_at=None, finished_at=timezone.now(),
                      reason="missed: catch-up policy 'none'")
    make_run(job, status=RunStatus.SKIPPED, scheduled_for=timezone.now() - timedelta(minutes=1),
             started_at=None, reason="overlap: previous run still going")

    assert watch.check()["missed"] == 1
    assert watch.check()["missed"] == 0
    send_pending()
    [body] = http_server.json_bodies()
    assert (body["event"], body["run"]["id"], body["run"]["status"]) == ("missed", missed.pk, "skipped")


@pytest.mark.django_db
def test_it_never_raises_into_the_run_when_notifications_break(caplog):
    channel_with_rule("webhook", {"url": "http://127.0.0.1:9/"}, ["failed"])
    run = make_run(make_job())
    run.job.pk = None  # a broken object: recording the event fails inside
    assert record_event(run, "failed") == 0
    assert f"could not record the failed event of run {run.pk}" in caplog.text
    assert JobRun.objects.filter(pk=run.pk).exists()  # the caller's transaction still works


def test_it_delivers_a_failure_alert_through_a_real_worker(processes, http_server):
    channel_with_rule("slack", {"url": f"{http_server.url}/hook"}, ["failed"])
    job = make_job("always-fails", target="builtin.fail")
    processes.worker()

    run = lifecycle.create_run(job)
    wait_for(lambda: http_server.requests, timeout=40, message="the Slack post")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    [post] = http_server.json_bodies()
    assert post["text"].startswith("*always-fails failed after 1 attempt(s)*")
    wait_for(lambda: Delivery.objects.filter(status="sent").exists(), timeout=10, message="the delivery marked sent")
