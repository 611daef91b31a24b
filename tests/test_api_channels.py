"""Notification channels in the API: staff only for changes, secrets write-only (masked when read,
kept when the mask is sent back), a test call against a real local HTTP server."""

import hashlib
import hmac

import pytest
from rest_framework.test import APIClient

from notifications import channel_secrets
from notifications.models import Channel, Rule

from .api_personas import make_personas
from .test_notifications_support import RecordingHTTPServer, grant_channel_permissions, opened_config

pytestmark = pytest.mark.django_db

MASK = channel_secrets.MASK
SLACK_URL = "https://hooks.slack.com/services/T000/B000/very-secret-token"


@pytest.fixture
def people():
    personas = make_personas()
    grant_channel_permissions(personas.staff)  # staff who manage channels
    return personas


@pytest.fixture
def http_server():
    with RecordingHTTPServer() as server:
        yield server


def test_it_creates_a_webhook_channel_and_never_answers_its_secret(people):
    staff = people.client(people.staff)
    response = staff.post("/api/channels/", {"name": "ops hook", "kind": "webhook",
                                             "config": {"url": "https://example.org/hook", "secret": "s3cret!"}},
                          format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["config"] == {"url": "https://example.org/hook", "secret": MASK}
    channel = Channel.objects.get(pk=response.json()["id"])
    assert opened_config(channel)["secret"] == "s3cret!"
    for path in ("/api/channels/", f"/api/channels/{channel.pk}/"):
        assert "s3cret!" not in staff.get(path).content.decode()


def test_a_slack_channels_url_is_masked_and_kept_when_the_mask_is_sent_back(people):
    staff = people.client(people.staff)
    created = staff.post("/api/channels/", {"name": "alerts", "kind": "slack", "config": {"url": SLACK_URL}},
                         format="json").json()
    assert created["config"] == {"url": MASK}
    renamed = staff.put(f"/api/channels/{created['id']}/", {"name": "alerts-2", "kind": "slack",
                                                            "config": {"url": MASK}}, format="json")
    assert renamed.status_code == 200, renamed.json()
    channel = Channel.objects.get(pk=created["id"])
    assert opened_config(channel) == {"url": SLACK_URL}
    assert channel.name == "alerts-2"
    patched = staff.patch(f"/api/channels/{created['id']}/", {"enabled": False}, format="json")
    assert patched.status_code == 200 and opened_config(channel) == {"url": SLACK_URL}
    new_url = "https://hooks.slack.com/services/T000/B000/another"
    staff.patch(f"/api/channels/{created['id']}/", {"config": {"url": new_url}}, format="json")
    assert opened_config(channel) == {"url": new_url}


def test_a_webhook_secret_can_be_kept_replaced_or_removed(people):
    staff = people.client(people.staff)
    channel = Channel.objects.create(name="hook", kind="webhook", config={"url": "https://a.example/h", "secret": "one"})
    path = f"/api/channels/{channel.pk}/"
    staff.patch(path, {"config": {"url": "https://a.example/other", "secret": MASK}}, format="json")
    assert opened_config(channel) == {"url": "https://a.example/other", "secret": "one"}
    # Kept, the secret stays with its host (tests/security/test_secret_binding.py).
    moved = staff.patch(path, {"config": {"url": "https://b.example/h", "secret": MASK}}, format="json")
    assert moved.status_code == 400
    staff.patch(path, {"config": {"url": "https://b.example/h", "secret": "two"}}, format="json")
    assert opened_config(channel)["secret"] == "two"
    staff.patch(path, {"config": {"url": "https://b.example/h"}}, format="json")
    assert opened_config(channel) == {"url": "https://b.example/h"}


def test_the_mask_without_a_stored_value_is_refused(people):
    staff = people.client(people.staff)
    response = staff.post("/api/channels/", {"name": "hook", "kind": "webhook",
                                             "config": {"url": "https://a.example/h", "secret": MASK}}, format="json")
    assert response.status_code == 400
    assert response.json() == {"config": ["secret: there is no stored value to keep; send the value itself."]}
    assert not Channel.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "x", "kind": "email", "config": {"recipients": ["not-an-address"]}}, "config"),
    ({"name": "x", "kind": "slack", "config": {"url": "ftp://nope"}}, "config"),
    ({"name": "x", "kind": "pager", "config": {}}, "kind"),
    ({"name": "x", "kind": "slack", "config": ["https://a.example"]}, "config"),
    ({"name": "x", "kind": "slack", "config": {"url": "https://a.example/\u0000"}}, "config"),
    ({"kind": "slack", "config": {"url": "https://a.example/"}}, "name"),
])
def test_bad_channels_get_a_message_per_field(people, body, field):
    people.staff_post_refused("/api/channels/", body, field, Channel)


def test_users_who_are_not_staff_see_a_directory_and_change_nothing(people):
    channel = Channel.objects.create(name="ops", kind="slack", config={"url": SLACK_URL}, shared=True)
    owner = people.client(people.owner)
    listed = owner.get("/api/channels/").json()["results"]
    assert listed == [{"id": channel.pk, "name": "ops", "kind": "slack", "enabled": True, "shared": True}]
    assert owner.get(f"/api/channels/{channel.pk}/").json() == listed[0]
    denied = [
        owner.post("/api/channels/", {"name": "mine", "kind": "slack", "config": {"url": SLACK_URL}}, format="json"),
        owner.patch(f"/api/channels/{channel.pk}/", {"name": "taken"}, format="json"),
        owner.delete(f"/api/channels/{channel.pk}/"),
        owner.post(f"/api/channels/{channel.pk}/test/"),
    ]
    assert [r.status_code for r in denied] == [403, 403, 403, 403]
    assert "needs the notifications.add_channel permission" in denied[0].json()["detail"]
    assert list(Channel.objects.values_list("name", flat=True)) == ["ops"]
    assert APIClient().get("/api/channels/").status_code == 401


def test_staff_delete_a_channel_with_its_rules(people):
    channel = Channel.objects.create(name="ops", kind="email", config={"recipients": ["ops@example.com"]})
    Rule.objects.create(channel=channel, events=["failed"])
    assert people.client(people.staff).delete(f"/api/channels/{channel.pk}/").status_code == 204
    assert not Channel.objects.exists() and not Rule.objects.exists()


def test_the_test_call_sends_a_signed_message_to_the_webhook(people, http_server, local_http_allowed):
    channel = Channel.objects.create(name="hook", kind="webhook", config={"url": f"{http_server.url}/in",
                                                                          "secret": "k3y"})
    response = people.client(people.staff).post(f"/api/channels/{channel.pk}/test/")
    assert response.status_code == 200
    assert response.json() == {"sent": True, "detail": "Sent a test notification to hook."}
    [request] = http_server.requests
    assert http_server.json_bodies()[0]["event"] == "test"
    expected = hmac.new(b"k3y", request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Signature"] == f"sha256={expected}"


def test_a_failed_test_call_says_why_without_the_secret_url(people, http_server, local_http_allowed):
    http_server.script = [404]
    url = f"{http_server.url}/services/T/B/secret-token"
    channel = Channel.objects.create(name="alerts", kind="slack", config={"url": url})
    body = people.client(people.staff).post(f"/api/channels/{channel.pk}/test/").json()
    assert body["sent"] is False
    assert body["detail"] == f"Could not send a test notification to alerts: {MASK} answered HTTP 404: no_service"
    listed = people.client(people.staff).get(f"/api/channels/{channel.pk}/").json()
    assert listed["last_error"] == f"{MASK} answered HTTP 404: no_service"
    assert "secret-token" not in str(listed)


def test_enabling_a_channel_again_clears_the_reason_it_was_disabled(people):
    channel = Channel.objects.create(name="ops", kind="email", config={"recipients": ["ops@example.com"]},
                                     enabled=False, disabled_reason="SMTP 550: no such user")
    response = people.client(people.staff).patch(f"/api/channels/{channel.pk}/", {"enabled": True}, format="json")
    assert response.json()["enabled"] is True and response.json()["disabled_reason"] == ""
    channel.refresh_from_db()
    assert channel.enabled and channel.disabled_reason == ""


def test_the_api_root_and_the_schema_list_channels_rules_and_jobs_as_code(people):
    client = people.client(people.owner)
    root = client.get("/api/").json()
    for name in ("jobs", "runs", "jobs-as-code", "workflows", "workflow-runs", "channels", "rules"):
        assert root[name].startswith("http://testserver/api/"), name
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path in ("/api/channels/", "/api/channels/{id}/", "/api/channels/{id}/test/", "/api/rules/",
                 "/api/rules/{id}/", "/api/jobs-as-code/", "/api/jobs/{id}/why/"):
        assert path in schema["paths"], path


def channel_writes(client, channel):
    """Each write a channel can get, answered: create, change, test, delete."""
    return [
        client.post("/api/channels/", {"name": "new", "kind": "email", "config": {"recipients": ["a@example.com"]}},
                    format="json").status_code,
        client.patch(f"/api/channels/{channel.pk}/", {"enabled": False}, format="json").status_code,
        client.post(f"/api/channels/{channel.pk}/test/").status_code,
        client.delete(f"/api/channels/{channel.pk}/").status_code,
    ]


def test_staff_without_the_channel_permissions_get_403_and_a_directory(people):
    bare_staff = people.staff.__class__.objects.create_user("bare-staff", is_staff=True)
    channel = Channel.objects.create(name="ops", kind="slack", config={"url": SLACK_URL}, shared=True)
    client = people.client(bare_staff)

    assert channel_writes(client, channel) == [403, 403, 403, 403]
    denied = client.post("/api/channels/", {"name": "x", "kind": "slack", "config": {"url": SLACK_URL}}, format="json")
    assert denied.json()["detail"] == ("You may not create channels: that needs the notifications.add_channel "
                                       "permission (channels serve everyone's jobs).")
    assert client.get(f"/api/channels/{channel.pk}/").json() == {"id": channel.pk, "name": "ops", "kind": "slack",
                                                                 "enabled": True, "shared": True}
    channel.refresh_from_db()
    assert list(Channel.objects.values_list("name", flat=True)) == ["ops"] and channel.enabled


def test_each_permission_allows_its_own_action_to_a_user_who_is_not_staff(people, http_server, local_http_allowed):
    channel = Channel.objects.create(name="ops", kind="webhook", config={"url": f"{http_server.url}/in",
                                                                         "secret": "k3y"}, owner=people.owner)
    client = people.client(people.owner)
    grant_channel_permissions(people.owner, "view")
    assert client.get(f"/api/channels/{channel.pk}/").json()["config"] == {"url": f"{http_server.url}/in",
                                                                            "secret": MASK}
    assert channel_writes(client, channel) == [403, 403, 403, 403]

    grant_channel_permissions(people.owner, "add")
    assert channel_writes(client, channel) == [201, 403, 403, 403]
    grant_channel_permissions(people.owner, "change")
    assert channel_writes(client, channel)[1:] == [200, 200, 403]
    assert len(http_server.requests) == 1  # the test message
    grant_channel_permissions(people.owner, "delete")
    assert client.delete(f"/api/channels/{channel.pk}/").status_code == 204
    assert list(Channel.objects.values_list("name", flat=True)) == ["new"]


def test_the_channels_page_follows_the_permissions(people, client, http_server, local_http_allowed):
    channel = Channel.objects.create(name="ops hook", kind="webhook", config={"url": f"{http_server.url}/in"},
                                     owner=people.owner)
    bare_staff = people.staff.__class__.objects.create_user("bare-staff", is_staff=True)
    client.force_login(bare_staff)
    assert client.get("/channels/").status_code == 404
    assert client.post(f"/channels/{channel.pk}/test/").status_code == 404

    client.force_login(grant_channel_permissions(people.owner, "view"))  # not staff
    page = client.get("/channels/")
    assert page.status_code == 200 and "ops hook" in page.content.decode()
    assert "Send a test notification" not in page.content.decode()
    assert client.post(f"/channels/{channel.pk}/test/").status_code == 404
    grant_channel_permissions(people.owner, "change")
    answer = client.post(f"/channels/{channel.pk}/test/", follow=True)
    assert "Sent a test notification to ops hook." in answer.content.decode()
    assert len(http_server.requests) == 1
