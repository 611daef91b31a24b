"""The paging channels, ``pagerduty`` and ``opsgenie``, against local servers that speak their
APIs' shapes (tests/paging_apis.py): a failure opens the job's alert, a second failure adds to it,
the recovery closes it; their keys are secrets; what the API refuses disables the channel with a
reason that does not quote the key; the outbound guard keeps them from inside addresses; and a real
worker pages and resolves."""

import pytest

from jobs import lifecycle
from jobs.models import RunStatus
from notifications import channel_secrets
from notifications.channels.paging import alert_key
from notifications.models import Channel, Delivery, DeliveryStatus
from notifications.outbox import record_event
from notifications.sending import send_test_notification

from .api_personas import make_personas
from .conftest import wait_for
from .paging_apis import OPSGENIE_KEY, PAGERDUTY_KEY, OpsgenieAPI, PagerDutyAPI
from .test_notifications_support import channel_with_rule, grant_channel_permissions, make_job, make_run, send_pending

EVENTS = ["failed", "timed_out", "recovered"]


def serving(api, setting, url, settings, monkeypatch):
    """The channels' ``setting`` pointed at ``api``'s ``url``, here and in the processes a test starts."""
    setattr(settings, setting, url)
    monkeypatch.setenv(setting, url)
    return api


@pytest.fixture
def pagerduty(settings, monkeypatch, local_http_allowed):
    with PagerDutyAPI() as api:
        yield serving(api, "NOTIFY_PAGERDUTY_URL", api.endpoint, settings, monkeypatch)


@pytest.fixture
def opsgenie(settings, monkeypatch, local_http_allowed):
    with OpsgenieAPI() as api:
        yield serving(api, "NOTIFY_OPSGENIE_URL", api.url, settings, monkeypatch)


def job_key(job):
    return alert_key({"event": "failed", "job": {"id": job.pk}})


def end(job, status, **fields):
    """A run of ``job`` that ended in ``status``, told to the outbox as the lifecycle tells it."""
    run = make_run(job, status=status, finished_at=fields.pop("finished_at", None), **fields)
    record_event(run, {"failed": "failed", "timed_out": "timed_out", "succeeded": "succeeded"}[status])
    return run


@pytest.mark.django_db
def test_pagerduty_triggers_once_per_incident_and_resolves_on_recovery(pagerduty):
    channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, EVENTS)
    job = make_job("nightly-report")
    first = end(job, RunStatus.FAILED, error="ValueError: the export is empty")
    end(job, RunStatus.TIMED_OUT)  # the incident is open: suppressed, as for every channel
    assert send_pending() == [DeliveryStatus.SENT]
    assert pagerduty.status(job_key(job)) == "triggered"
    [trigger] = pagerduty.accepted(job_key(job))
    assert trigger["payload"]["summary"] == "nightly-report failed after 1 attempt(s)"
    assert (trigger["payload"]["severity"], trigger["payload"]["component"], trigger["payload"]["class"]) == (
        "error", "nightly-report", "failed")
    assert trigger["payload"]["custom_details"]["error"] == "ValueError: the export is empty"
    run_link, acknowledge_link = trigger["links"]
    assert run_link == {"href": f"http://127.0.0.1:8000/runs/{first.pk}/", "text": "The run"}
    assert acknowledge_link["href"].startswith("http://127.0.0.1:8000/acknowledge/")

    end(job, RunStatus.SUCCEEDED)
    assert send_pending() == [DeliveryStatus.SENT]

    assert pagerduty.status(job_key(job)) == "resolved"
    assert [e["event_action"] for e in pagerduty.accepted(job_key(job))] == ["trigger", "resolve"]
    other = make_job("other-job")
    end(other, RunStatus.FAILED)
    send_pending()
    assert pagerduty.statuses() == {job_key(job): "resolved", job_key(other): "triggered"}


@pytest.mark.django_db
def test_opsgenie_creates_an_alert_by_alias_and_closes_it_on_recovery(opsgenie):
    channel_with_rule("opsgenie", {"api_key": OPSGENIE_KEY, "priority": "P2"}, EVENTS)
    job = make_job("nightly-report-" + "x" * 150)  # a message longer than Opsgenie's 130 characters
    end(job, RunStatus.FAILED, error="ValueError: the export is empty")
    assert send_pending() == [DeliveryStatus.SENT]
    [created] = opsgenie.accepted(job_key(job))
    assert (created["alias"], created["priority"], created["entity"]) == (job_key(job), "P2", job.name)
    assert len(created["message"]) == 130 and "ValueError: the export is empty" in created["description"]
    assert opsgenie.status(job_key(job)) == "open"

    end(job, RunStatus.SUCCEEDED)
    assert send_pending() == [DeliveryStatus.SENT]

    assert opsgenie.status(job_key(job)) == "closed"
    path, headers, _ = opsgenie.requests[-1]
    assert path.endswith("/close?identifierType=alias") and headers["Authorization"] == f"GenieKey {OPSGENIE_KEY}"


@pytest.mark.django_db
def test_a_test_send_opens_the_test_alert_and_closes_it(pagerduty, opsgenie):
    for kind, config, api in (("pagerduty", {"routing_key": PAGERDUTY_KEY}, pagerduty),
                              ("opsgenie", {"api_key": OPSGENIE_KEY}, opsgenie)):
        channel = Channel.objects.create(name=kind, kind=kind, config=config)
        assert send_test_notification(channel) == (True, f"Sent a test notification to {kind}.")
        assert list(api.statuses().values()) == ["resolved" if kind == "pagerduty" else "closed"]


@pytest.mark.django_db
def test_their_keys_are_secrets_masked_encrypted_and_checked():
    people = make_personas()
    staff = people.client(grant_channel_permissions(people.staff))
    for kind, key_name, key in (("pagerduty", "routing_key", PAGERDUTY_KEY), ("opsgenie", "api_key", OPSGENIE_KEY)):
        response = staff.post("/api/channels/", {"name": kind, "kind": kind, "config": {key_name: key}}, format="json")
        assert response.status_code == 201, response.json()
        assert response.json()["config"] == {key_name: channel_secrets.MASK}
        stored = Channel.objects.filter(name=kind).values_list("config", flat=True).get()[key_name]
        assert channel_secrets.is_sealed(stored) and key not in staff.get("/api/channels/").content.decode()

    bad = {"pagerduty": [{}, {"routing_key": "short"}, {"routing_key": PAGERDUTY_KEY, "severity": "loud"},
                         {"routing_key": PAGERDUTY_KEY[:-1] + "\n"}],
           "opsgenie": [{}, {"api_key": "has spaces in it"}, {"api_key": "k" * 201},
                        {"api_key": OPSGENIE_KEY, "priority": "P9"}]}
    for kind, configs in bad.items():
        for config in configs:
            response = staff.post("/api/channels/", {"name": f"bad-{kind}", "kind": kind, "config": config},
                                  format="json")
            assert response.status_code == 400, (kind, config)
            assert list(response.json()) == ["config"]
    assert sorted(Channel.objects.values_list("name", flat=True)) == ["opsgenie", "pagerduty"]


@pytest.mark.django_db
def test_a_key_the_api_refuses_disables_the_channel_and_the_reason_does_not_quote_it(pagerduty, opsgenie):
    wrong_pagerduty, wrong_opsgenie = "f" * 32, "wrong-key-3c1d9a7e"
    pd = channel_with_rule("pagerduty", {"routing_key": wrong_pagerduty}, ["failed"])
    og = channel_with_rule("opsgenie", {"api_key": wrong_opsgenie}, ["failed"], name="opsgenie")
    end(make_job(), RunStatus.FAILED)

    assert send_pending() == [DeliveryStatus.FAILED, DeliveryStatus.FAILED]

    for channel in (pd, og):
        channel.refresh_from_db()
        assert not channel.enabled
    assert "answered HTTP 400" in pd.disabled_reason and "'routing_key' is invalid" in pd.disabled_reason
    assert "answered HTTP 401" in og.disabled_reason and "Could not authenticate" in og.disabled_reason
    texts = " ".join(Delivery.objects.values_list("last_error", flat=True)) + pd.disabled_reason + og.disabled_reason
    assert wrong_pagerduty not in texts and wrong_opsgenie not in texts
    assert pagerduty.statuses() == {} and opsgenie.statuses() == {}


@pytest.mark.django_db
def test_a_busy_api_is_tried_again(settings, local_http_allowed):
    from .test_notifications_support import RecordingHTTPServer

    with RecordingHTTPServer(script=[429]) as busy:
        settings.NOTIFY_PAGERDUTY_URL = f"{busy.url}/v2/enqueue"
        channel = channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, ["failed"])
        end(make_job(), RunStatus.FAILED)
        assert send_pending() == [DeliveryStatus.PENDING]
    channel.refresh_from_db()
    assert channel.enabled and "answered HTTP 429" in channel.last_error


@pytest.mark.django_db
def test_the_outbound_guard_keeps_them_from_inside_addresses(settings):
    # No JOBS_HTTP_ALLOWED_NETWORKS: an API URL pointed at this machine is refused, never reached.
    settings.NOTIFY_PAGERDUTY_URL = "http://127.0.0.1:9/v2/enqueue"
    settings.NOTIFY_OPSGENIE_URL = "http://169.254.169.254"
    channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, ["failed"])
    channel_with_rule("opsgenie", {"api_key": OPSGENIE_KEY}, ["failed"], name="opsgenie")
    end(make_job(), RunStatus.FAILED)

    assert send_pending() == [DeliveryStatus.FAILED, DeliveryStatus.FAILED]
    assert all(error.startswith("refused: ") for error in Delivery.objects.values_list("last_error", flat=True))


# --- end to end, with a real worker


def run_to_its_end(job):
    run = lifecycle.create_run(job)

    def finished():
        run.refresh_from_db()
        return run.is_terminal

    wait_for(finished, timeout=40, message=f"run {run.pk} to end")
    return run.status


@pytest.mark.timeout(150)
def test_a_real_worker_pages_a_failure_and_resolves_the_recovery(processes, tmp_path, pagerduty, opsgenie):
    marker = tmp_path / "broken"
    marker.touch()
    job = make_job("fails-until-fixed", target="test.fail_while", kwargs={"marker": str(marker)})
    channel_with_rule("pagerduty", {"routing_key": PAGERDUTY_KEY}, EVENTS)
    channel_with_rule("opsgenie", {"api_key": OPSGENIE_KEY}, EVENTS, name="opsgenie")
    processes.worker()

    assert run_to_its_end(job) == RunStatus.FAILED
    wait_for(lambda: pagerduty.status(job_key(job)) == "triggered" and opsgenie.status(job_key(job)) == "open",
             timeout=40, message="the worker to page PagerDuty and Opsgenie")

    marker.unlink()
    assert run_to_its_end(job) == RunStatus.SUCCEEDED
    wait_for(lambda: pagerduty.status(job_key(job)) == "resolved" and opsgenie.status(job_key(job)) == "closed",
             timeout=40, message="the worker to resolve the alerts")
    assert [e["event_action"] for e in pagerduty.accepted(job_key(job))] == ["trigger", "resolve"]
    sent = {("failed", "sent"), ("recovered", "sent")}
    wait_for(lambda: set(Delivery.objects.values_list("event", "status")) == sent, timeout=20,
             message="the deliveries to be recorded as sent")
