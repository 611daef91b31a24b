"""The channel form of the pages: a channel of each kind made, changed and deleted through the API's
serializer and the channel actions (each an audit entry), its secrets write-only, bad input answered
with the API's message and what was typed kept, another team's channel out of reach."""

import pytest

from audit.models import AuditEntry, Subject
from notifications import channel_secrets
from notifications.models import Channel

from .api_personas import browser, make_personas
from .test_notifications_support import grant_channel_permissions, opened_config

pytestmark = pytest.mark.django_db

SLACK_URL = "https://hooks.slack.com/services/T000/B000/very-secret-token"


@pytest.fixture
def people():
    personas = make_personas()
    for user in (personas.staff, personas.owner, personas.outsider):
        grant_channel_permissions(user)
    return personas


def channel_post(kind, name, **config):
    body = {"name": name, "kind": kind, "enabled": "on"}
    for key, value in config.items():
        body[f"{kind}.{key}" + ("-value" if isinstance(value, list) else "")] = value
    return body


def test_a_channel_of_each_kind_is_made_through_the_form(people):
    staff = browser(people.staff)
    assert "Create the channel" in staff.get("/channels/new/").content.decode()
    for body in (channel_post("email", "ops-mail", recipients=["ops@example.com", "oncall@example.com"]),
                 channel_post("slack", "alerts", url=SLACK_URL),
                 channel_post("webhook", "hook", url="https://example.org/hook", secret="s3cret!"),
                 channel_post("pagerduty", "pager", routing_key="R" * 32, severity="critical"),
                 channel_post("opsgenie", "genie", api_key="genie-key", priority="")):
        answer = staff.post("/channels/new/", body)
        assert answer.status_code == 302 and answer["Location"] == "/channels/"
    assert opened_config(Channel.objects.get(name="ops-mail")) == {"recipients": ["ops@example.com",
                                                                                  "oncall@example.com"]}
    assert opened_config(Channel.objects.get(name="alerts")) == {"url": SLACK_URL}
    assert opened_config(Channel.objects.get(name="hook")) == {"url": "https://example.org/hook", "secret": "s3cret!"}
    assert opened_config(Channel.objects.get(name="pager")) == {"routing_key": "R" * 32, "severity": "critical"}
    assert opened_config(Channel.objects.get(name="genie")) == {"api_key": "genie-key"}  # a blank option: none
    assert Channel.objects.get(name="hook").config["secret"] != "s3cret!"  # stored encrypted
    assert list(AuditEntry.objects.filter(subject=Subject.CHANNEL).values_list("action", "source")) == [
        ("create", "page")] * 5


def test_a_stored_secret_is_never_shown_and_a_blank_one_is_kept(people):
    staff = browser(people.staff)
    staff.post("/channels/new/", channel_post("webhook", "hook", url="https://example.org/hook", secret="s3cret!"))
    channel = Channel.objects.get(name="hook")
    form = staff.get(f"/channels/{channel.pk}/edit/").content.decode()
    assert "s3cret!" not in form and channel.config["secret"] not in form and "Leave this blank to keep it" in form
    assert "Save" in form and "Create the channel" not in form
    answer = staff.post(f"/channels/{channel.pk}/edit/", channel_post("webhook", "hook-2", url="https://example.org/2"))
    assert answer.status_code == 302
    assert opened_config(channel) == {"url": "https://example.org/2", "secret": "s3cret!"}
    staff.post(f"/channels/{channel.pk}/edit/", channel_post("webhook", "hook-2", url="https://example.org/2",
                                                               secret="new one"))
    assert opened_config(channel)["secret"] == "new one"
    change = AuditEntry.objects.filter(subject=Subject.CHANNEL, action="change").last()
    assert "new one" not in str(change.changes) and "s3cret!" not in str(change.changes)


def test_changing_the_kind_with_a_blank_secret_says_what_is_missing(people):
    staff = browser(people.staff)
    staff.post("/channels/new/", channel_post("slack", "alerts", url=SLACK_URL))
    channel = Channel.objects.get(name="alerts")
    answer = staff.post(f"/channels/{channel.pk}/edit/", channel_post("email", "alerts", recipients=["nobody"]))
    assert answer.status_code == 400
    text = answer.content.decode()
    assert 'An email channel needs {&quot;recipients&quot;: [&quot;someone@example.com&quot;]}.' in text
    assert 'value="nobody"' in text and 'value="alerts"' in text  # what was typed, kept
    assert opened_config(channel) == {"url": SLACK_URL} and channel.kind == "slack"


@pytest.mark.parametrize("body, field, message", [
    (channel_post("webhook", "", url="https://example.org/hook"), "name", "This field may not be blank."),
    (channel_post("webhook", "x" * 300, url="https://example.org/hook"), "name", "no more than"),
    (channel_post("webhook", "hook", url="javascript:alert(1)"), "config", "http"),
    (channel_post("email", "mail\x00", recipients=["ops@example.com"]), "name", "Null characters are not allowed."),
    (channel_post("nonsense", "hook"), "kind", "is not a valid choice."),
])
def test_bad_input_shows_the_apis_message_and_saves_nothing(people, body, field, message):
    api = people.client(people.staff).post("/api/channels/", {"name": body["name"], "kind": body["kind"],
                                                              "config": {"url": body.get("webhook.url", "")}},
                                           format="json")
    answer = browser(people.staff).post("/channels/new/", body)
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert field in api.json() and any(message in text for text in api.json()[field])
    assert not Channel.objects.exists()


def test_another_teams_channel_is_not_found_and_a_shared_one_not_changed(people):
    theirs = Channel.objects.create(name="theirs", kind="email", config={"recipients": ["a@example.com"]},
                                    owner=people.outsider)
    shared = Channel.objects.create(name="everyone", kind="email", config={"recipients": ["a@example.com"]},
                                    shared=True)
    owner = browser(people.owner)
    assert owner.get(f"/channels/{theirs.pk}/edit/").status_code == 404
    assert owner.post(f"/channels/{theirs.pk}/edit/", channel_post("email", "mine", recipients=["b@x.org"])
                      ).status_code == 404
    assert owner.post(f"/channels/{theirs.pk}/delete/").status_code == 404
    assert owner.post(f"/channels/{shared.pk}/edit/", channel_post("email", "mine", recipients=["b@x.org"])
                      ).status_code == 403
    assert Channel.objects.filter(name__in=["theirs", "everyone"]).count() == 2
    assert f"/channels/{theirs.pk}/edit/" not in owner.get("/channels/").content.decode()


def test_a_user_who_is_not_staff_cannot_mark_a_channel_shared(people):
    owner = browser(people.owner)
    assert 'name="shared"' not in owner.get("/channels/new/").content.decode()
    answer = owner.post("/channels/new/", {**channel_post("email", "mine", recipients=["b@example.com"]),
                                           "shared": "on", "group": "team"})
    assert answer.status_code == 400
    assert "Only staff may share something with everyone." in answer.content.decode()
    assert not Channel.objects.exists()
    assert owner.post("/channels/new/", {**channel_post("email", "mine", recipients=["b@example.com"]),
                                         "group": "team"}).status_code == 302
    assert Channel.objects.get().group == people.team and not Channel.objects.get().shared


def test_a_channel_is_deleted_from_its_form_and_users_without_the_permission_see_nothing(people):
    staff = browser(people.staff)
    staff.post("/channels/new/", channel_post("email", "ops-mail", recipients=["ops@example.com"]))
    channel = Channel.objects.get()
    assert f"/channels/{channel.pk}/edit/" in staff.get("/channels/").content.decode()
    teammate = browser(people.teammate)  # no channel permission
    assert teammate.get("/channels/new/").status_code == 404
    assert teammate.get(f"/channels/{channel.pk}/edit/").status_code == 404
    assert teammate.post(f"/channels/{channel.pk}/delete/").status_code == 404
    answer = staff.post(f"/channels/{channel.pk}/delete/")
    assert answer.status_code == 302 and answer["Location"] == "/channels/"
    assert not Channel.objects.exists()
    assert AuditEntry.objects.filter(subject=Subject.CHANNEL, action="delete", source="page").count() == 1


def test_the_mask_typed_as_a_secret_is_not_taken_for_the_stored_value_of_a_new_channel(people):
    answer = browser(people.staff).post("/channels/new/", channel_post("slack", "alerts", url=channel_secrets.MASK))
    assert answer.status_code == 400
    assert "there is no stored value to keep" in answer.content.decode()
    assert not Channel.objects.exists()
