"""A channel kind added as a deployment would add one, one package (tests/log_channel) and its line in
NOTIFICATION_CHANNEL_KINDS, and nothing else: the API, the admin, the channels page and a jobs file
offer it, its secret is masked and stored encrypted, and the outbox sends through it."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from jobs.models import RunStatus
from notifications import channel_secrets
from notifications.models import Channel, Delivery, DeliveryStatus
from notifications.outbox import record_event

from .api_personas import make_personas
from .test_notifications_support import (
    channel_with_rule,
    grant_channel_permissions,
    make_job,
    make_run,
    opened_config,
    send_pending,
)

pytestmark = pytest.mark.django_db

MASK = channel_secrets.MASK
TOKEN = "log-token-8f3a2c91d7e4"
KINDS = ["notifications.channels.email", "notifications.channels.slack", "notifications.channels.webhook",
         "tests.log_channel"]


@pytest.fixture(autouse=True)
def log_kind(settings):
    settings.NOTIFICATION_CHANNEL_KINDS = KINDS


@pytest.fixture
def log_config(tmp_path):
    return {"path": str(tmp_path / "alerts.log"), "token": TOKEN}


def stored_token(channel):
    return Channel.objects.filter(pk=channel.pk).values_list("config", flat=True).get()["token"]


def test_the_api_creates_a_channel_of_the_added_kind_its_secret_masked_and_encrypted(log_config):
    people = make_personas()
    staff = people.client(grant_channel_permissions(people.staff))

    response = staff.post("/api/channels/", {"name": "audit-log", "kind": "log", "config": log_config}, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["config"] == {"path": log_config["path"], "token": MASK}
    channel = Channel.objects.get(pk=response.json()["id"])
    assert stored_token(channel) != TOKEN and channel_secrets.is_sealed(stored_token(channel))
    assert opened_config(channel) == log_config
    assert TOKEN not in staff.get("/api/channels/").content.decode()

    refused = staff.post("/api/channels/", {"name": "relative", "kind": "log",
                                            "config": {**log_config, "path": "alerts.log"}}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {"config": ['A log channel needs {"path": "/an/absolute/path"}.']}
    assert list(Channel.objects.values_list("name", flat=True)) == ["audit-log"]


def test_the_admin_and_the_channels_page_offer_the_added_kind(admin_client, log_config):
    form = admin_client.get("/admin/notifications/channel/add/").content.decode()
    assert '<option value="log">Log file</option>' in form
    assert 'log: {"path": "/var/log/alerts.log", "token": "..."}' in form and "Secret values (" in form

    response = admin_client.post("/admin/notifications/channel/add/", {
        "name": "audit-log", "kind": "log", "enabled": "on", "config": json.dumps(log_config)})

    assert response.status_code == 302, response.content.decode()[:2000]
    channel = Channel.objects.get(name="audit-log")
    assert channel_secrets.is_sealed(stored_token(channel)) and opened_config(channel) == log_config
    change = admin_client.get(f"/admin/notifications/channel/{channel.pk}/change/").content.decode()
    assert MASK in change and TOKEN not in change
    page = admin_client.get("/channels/").content.decode()
    assert f'<a href="/channels/{channel.pk}/edit/">audit-log</a></td>\n      <td>Log file</td>' in page
    assert "<td>Log file</td><td><code>log</code></td>" in page and "<td>token</td>" in page
    assert TOKEN not in page
    edit = admin_client.get(f"/channels/{channel.pk}/edit/").content.decode()  # the kind's own fields
    assert f'name="log.path" id="id_log.path" value="{log_config["path"]}"' in edit
    assert 'name="log.token" id="id_log.token" value="" type="password"' in edit and TOKEN not in edit


def test_a_jobs_file_applies_a_channel_of_the_added_kind_with_its_secret_from_the_environment(
        tmp_path, log_config, monkeypatch):
    monkeypatch.setenv("AUDIT_LOG_TOKEN", TOKEN)
    path = tmp_path / "jobs.yaml"
    path.write_text(f"""\
jobs: []
channels:
- name: audit-log
  kind: log
  config: {{path: {log_config["path"]}, token_env: AUDIT_LOG_TOKEN}}
rules:
- channel: audit-log
  events: [failed]
""")
    out = StringIO()

    call_command("jobs", "apply", str(path), stdout=out, stderr=out)

    assert out.getvalue().splitlines()[-1] == "applied: 2 created, 0 updated, 0 deleted.", out.getvalue()
    channel = Channel.objects.get(name="audit-log")
    assert channel.kind == "log" and opened_config(channel) == log_config
    assert channel.rules.get().events == ["failed"]
    exported = tmp_path / "exported.yaml"
    call_command("jobs", "export", str(exported), stdout=StringIO())
    assert "kind: log" in exported.read_text() and f"token: '{MASK}'" in exported.read_text()
    assert TOKEN not in out.getvalue() + exported.read_text()


def test_the_outbox_sends_a_failed_run_through_the_added_kind(log_config):
    channel = channel_with_rule("log", log_config, ["failed"], name="audit-log")
    run = make_run(make_job("nightly-report"), status=RunStatus.FAILED, error="ValueError: boom")

    record_event(run, "failed")

    assert send_pending() == [DeliveryStatus.SENT]
    with open(log_config["path"]) as log:
        assert log.read() == f"{TOKEN} nightly-report failed after 1 attempt(s)\n"
    assert Delivery.objects.get(channel=channel).attempts == 1


def test_a_send_the_added_kind_refuses_disables_the_channel_with_its_reason(tmp_path, log_config):
    missing = str(tmp_path / "no-such-folder" / "alerts.log")
    channel = channel_with_rule("log", {**log_config, "path": missing}, ["failed"], name="audit-log")
    record_event(make_run(make_job(), status=RunStatus.FAILED), "failed")

    assert send_pending() == [DeliveryStatus.FAILED]
    channel.refresh_from_db()
    assert not channel.enabled and channel.disabled_reason.startswith(f"cannot write {missing}: ")
