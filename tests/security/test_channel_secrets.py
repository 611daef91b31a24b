"""Channel secrets (a Slack webhook URL, a webhook's signing secret) get the job secrets' treatment:
encrypted in the database with JOBS_SECRETS_KEYS, never shown (API, admin, pages, export), redacted
from every error text a failed send produces (the delivery, the channel, the log, the run page),
and encrypted again by ``secrets rotate``."""

import hashlib
import hmac
import json
import logging
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection

from audit.models import AuditEntry
from jobs import lifecycle
from jobs.access import secrets
from jobs.definitions.jobs import save_job
from jobs.models import Job
from notifications import channel_secrets
from notifications.models import Channel, Delivery, DeliveryStatus, Rule
from notifications.outbox import record_event
from notifications.sending import send_delivery, send_test_notification

from ..conftest import wait_for
from ..test_notifications_support import (
    RecordingHTTPServer,
    free_port,
    grant_channel_permissions,
    make_run,
    opened_config,
)

TOKEN = "xoxb-channel-secret-7Hq2Zk9Lm4"
HOOK_PATH = f"/services/T0SECRET/B0SECRET/{TOKEN}"
SIGNING_SECRET = "signing-secret-Vb81Rw"


def echoing_404(handler):
    """What a picky receiver (or a proxy in front of it) answers: the path it did not know, quoted."""
    body = f"no such hook: {handler.path}".encode()
    handler.send_response(404)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def manager(people):
    """Staff who manage channels (the channel permissions)."""
    return grant_channel_permissions(people.staff)


def stored_configs():
    with connection.cursor() as cursor:
        cursor.execute("SELECT CAST(config AS text) FROM notifications_channel ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def assert_no_secret(text, where):
    """Neither a secret value, nor a piece of the Slack URL that gives it away, nor its ciphertext."""
    tokens = [value for channel in Channel.objects.all() for key, value in channel.config.items()
              if key in channel_secrets.secret_keys(channel.kind)]
    for secret in (TOKEN, HOOK_PATH, SIGNING_SECRET, *tokens):
        assert secret not in text, f"{secret!r} found in {where}"


def test_the_database_holds_only_ciphertext_and_the_api_answers_the_mask(people, manager, settings):
    client = people.api(manager)
    slack = client.post("/api/channels/", {"name": "ops-slack", "kind": "slack",
                                           "config": {"url": f"https://hooks.slack.com{HOOK_PATH}"}}, format="json")
    hook = client.post("/api/channels/", {"name": "ops-hook", "kind": "webhook",
                                          "config": {"url": "https://example.org/in", "secret": SIGNING_SECRET}},
                       format="json")
    assert (slack.status_code, hook.status_code) == (201, 201), (slack.json(), hook.json())

    rows = stored_configs()
    for row in rows:
        assert TOKEN not in row and SIGNING_SECRET not in row
    slack_token = json.loads(rows[0])["url"]  # ordered by id: the Slack channel first
    box = Fernet(settings.JOBS_SECRETS_KEYS[0])
    assert box.decrypt(slack_token.encode()).decode() == f"https://hooks.slack.com{HOOK_PATH}"
    assert box.decrypt(json.loads(rows[1])["secret"].encode()).decode() == SIGNING_SECRET
    assert json.loads(rows[1])["url"] == "https://example.org/in"  # a webhook's URL is not its secret
    for url in ("/api/channels/", f"/api/channels/{slack.json()['id']}/", f"/api/channels/{hook.json()['id']}/"):
        assert_no_secret(client.get(url).content.decode(), url)
    assert client.get(f"/api/channels/{hook.json()['id']}/").json()["config"] == {
        "url": "https://example.org/in", "secret": secrets.MASK}


def test_without_a_key_a_secret_is_refused_not_stored_in_clear(people, manager, settings):
    settings.JOBS_SECRETS_KEYS = []
    response = people.api(manager).post("/api/channels/", {
        "name": "ops-slack", "kind": "slack", "config": {"url": f"https://hooks.slack.com{HOOK_PATH}"}},
        format="json")
    assert response.status_code == 400
    assert "JOBS_SECRETS_KEYS" in response.json()["config"][0]
    assert not Channel.objects.exists()


def test_a_failed_send_by_a_worker_leaves_the_secret_nowhere(processes, people, manager, local_http_allowed,
                                                               inside, client):
    """A real worker runs a failing job and sends its alert to a Slack hook that answers 404 quoting
    the path: the error is kept (the owner learns the channel is broken), the secret is not."""
    inside.routes[HOOK_PATH] = echoing_404
    job = save_job(Job(name="owners-failing", kind="callable", target="builtin.fail", owner=people.owner,
                       group=people.team, max_retries=0), {"type": "manual"})
    channel = Channel.objects.create(name="ops-slack", kind="slack", config={"url": f"{inside.url}{HOOK_PATH}"})
    Rule.objects.create(channel=channel, events=["failed"])
    processes.worker()

    run = lifecycle.create_run(job)
    wait_for(lambda: Delivery.objects.filter(run=run, status=DeliveryStatus.FAILED).exists(), timeout=60,
             message="the alert's delivery to fail")

    assert [hit["path"] for hit in inside.hits] == [HOOK_PATH]  # it was sent, to the secret URL
    delivery = Delivery.objects.get(run=run)
    channel.refresh_from_db()
    assert delivery.last_error == f"{secrets.MASK} answered HTTP 404: no such hook: {secrets.MASK}"
    assert channel.disabled_reason == delivery.last_error and not channel.enabled
    for where, text in [("the delivery", delivery.last_error), ("the channel", channel.last_error),
                        ("the worker's log", processes.logs())]:
        assert_no_secret(text, where)

    client.force_login(people.owner)  # not staff: the run page shows the delivery and its error
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "answered HTTP 404" in page
    assert_no_secret(page, "the run page")
    for url in ("/api/channels/", f"/api/channels/{channel.pk}/", f"/api/runs/{run.pk}/"):
        assert_no_secret(people.api(manager).get(url).content.decode(), url)
    superuser = User.objects.create_superuser("root")
    client.force_login(superuser)
    for url in ("/channels/", "/admin/notifications/channel/", f"/admin/notifications/channel/{channel.pk}/change/",
                "/admin/notifications/delivery/", f"/admin/notifications/delivery/{delivery.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_secret(response.content.decode(), url)


def test_an_unreachable_hook_is_retried_and_logged_without_its_secret(people, local_http_allowed, caplog):
    url = f"http://127.0.0.1:{free_port()}{HOOK_PATH}"  # nothing listens there: connection refused
    channel = Channel.objects.create(name="ops-slack", kind="slack", config={"url": url})
    Rule.objects.create(channel=channel, events=["failed"])
    job = save_job(Job(name="owners-job", kind="callable", target="builtin.noop", owner=people.owner), {"type": "manual"})
    run = make_run(job, status="failed", error="boom")
    record_event(run, "failed")
    delivery = Delivery.objects.get(run=run)

    with caplog.at_level(logging.DEBUG):
        assert send_delivery(delivery.pk) == DeliveryStatus.PENDING  # transient: tried again later
        sent, text = send_test_notification(channel)

    delivery.refresh_from_db()
    channel.refresh_from_db()
    assert delivery.last_error.startswith(f"could not reach {secrets.MASK}: Could not connect to 127.0.0.1")
    assert sent is False and "could not reach" in text
    for where, value in [("the delivery", delivery.last_error), ("the channel", channel.last_error),
                         ("the test's answer", text), ("the log", caplog.text)]:
        assert_no_secret(value, where)


def test_the_admin_and_the_export_show_the_mask_and_saving_it_back_keeps_the_secret(people, client, tmp_path):
    superuser = User.objects.create_superuser("root")
    channel = Channel.objects.create(name="ops-hook", kind="webhook",
                                     config={"url": "https://example.org/in", "secret": SIGNING_SECRET})
    client.force_login(superuser)
    url = f"/admin/notifications/channel/{channel.pk}/change/"
    form = client.get(url).content.decode()
    assert_no_secret(form, url)
    assert secrets.MASK in form

    response = client.post(url, {"name": "ops-hook-2", "kind": "webhook", "enabled": "on", "config": json.dumps(
        {"url": "https://example.org/in", "secret": secrets.MASK})})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert opened_config(channel) == {"url": "https://example.org/in", "secret": SIGNING_SECRET}
    assert channel.name == "ops-hook-2"
    assert_no_secret(client.get("/admin/audit/auditentry/").content.decode(), "the audit list")

    path = tmp_path / "jobs.yaml"
    call_command("jobs", "export", str(path), stdout=StringIO())
    assert_no_secret(path.read_text(), "the export")
    assert "ops-hook-2" in path.read_text() and secrets.MASK in path.read_text()
    out = StringIO()
    call_command("jobs", "apply", str(path), stdout=out)
    assert out.getvalue().splitlines()[-1] == "no changes"
    assert opened_config(channel)["secret"] == SIGNING_SECRET


def test_secrets_rotate_encrypts_channel_secrets_again_and_sending_still_works(people, settings,
                                                                               local_http_allowed):
    old = settings.JOBS_SECRETS_KEYS[0]
    with RecordingHTTPServer() as server:
        channel = Channel.objects.create(name="ops-hook", kind="webhook",
                                         config={"url": f"{server.url}/in", "secret": SIGNING_SECRET})
        new = secrets.new_key()
        settings.JOBS_SECRETS_KEYS = [new, old]
        out = StringIO()
        call_command("secrets", "rotate", stdout=out)
        settings.JOBS_SECRETS_KEYS = [new]  # the old key removed

        assert "1 channel(s)" in out.getvalue()
        [row] = stored_configs()
        assert Fernet(new).decrypt(json.loads(row)["secret"].encode()).decode() == SIGNING_SECRET
        response = people.api(grant_channel_permissions(people.staff)).post(f"/api/channels/{channel.pk}/test/")
        assert response.json() == {"sent": True, "detail": "Sent a test notification to ops-hook."}
        [request] = server.requests
        expected = hmac.new(SIGNING_SECRET.encode(), request["body"], hashlib.sha256).hexdigest()
        assert request["headers"]["X-Signature"] == f"sha256={expected}"

    settings.JOBS_SECRETS_KEYS = [old]
    channel.refresh_from_db()
    with pytest.raises(channel_secrets.SecretsUnavailable):
        channel_secrets.opened(channel.kind, channel.config)
    entry = AuditEntry.objects.get(subject="secrets")
    assert (entry.action, entry.source, entry.actor) == ("rotate", "cli", None)
    assert entry.actor_name.endswith("(OS user)")
    assert "1 channels" in entry.detail and "0 jobs" in entry.detail


def test_rotate_changes_nothing_when_a_channel_secret_cannot_be_decrypted(people, settings):
    old = settings.JOBS_SECRETS_KEYS[0]
    channel = Channel.objects.create(name="ops-slack", kind="slack", config={"url": f"https://hooks.slack.com{HOOK_PATH}"})
    before = stored_configs()
    settings.JOBS_SECRETS_KEYS = [secrets.new_key()]  # the key it was stored with is gone

    with pytest.raises(CommandError, match=f"channel {channel.pk}: .* Nothing was changed."):
        call_command("secrets", "rotate", stdout=StringIO())

    assert stored_configs() == before
    assert not AuditEntry.objects.filter(subject="secrets").exists()
    settings.JOBS_SECRETS_KEYS = [old]
    assert opened_config(channel) == {"url": f"https://hooks.slack.com{HOOK_PATH}"}


def test_staff_who_may_only_view_a_channel_see_its_secret_masked_in_the_admin(people, client):
    channel = Channel.objects.create(name="ops-slack", kind="slack", config={"url": f"https://hooks.slack.com{HOOK_PATH}"})
    client.force_login(grant_channel_permissions(people.staff, "view"))

    for url in ("/admin/notifications/channel/", f"/admin/notifications/channel/{channel.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_no_secret(response.content.decode(), url)
    assert secrets.MASK in client.get(f"/admin/notifications/channel/{channel.pk}/change/").content.decode()
