"""The audit trail of channels and rules: each create, change and delete, from the API, the admin and
a jobs-as-code file, recorded once with who, from where and what changed, secret values hidden."""

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from notifications.models import Channel, Rule

from .api_personas import make_personas
from .test_notifications_support import grant_channel_permissions
from .work_trail import work_entries

pytestmark = pytest.mark.django_db

SLACK = "https://hooks.slack.com/services/T000/B000/very-secret-token"
OTHER_SLACK = "https://hooks.slack.com/services/T000/B000/another-secret-token"


@pytest.fixture
def people():
    personas = make_personas()
    grant_channel_permissions(personas.staff)
    return personas


def trail(subject):
    return [(e.action, e.job_name, e.actor_name, e.source, e.changes)
            for e in work_entries().filter(subject=subject).order_by("created_at", "id")]


def assert_no_secret():
    text = json.dumps(list(work_entries().values_list("changes", "detail")))
    tokens = [c.config["url"] for c in Channel.objects.filter(kind="slack")]
    for secret in ("very-secret-token", "another-secret-token", *tokens):
        assert secret not in text


def test_the_api_records_each_channel_change_with_its_secret_hidden(people):
    client = people.client(people.staff)
    created = client.post("/api/channels/", {"name": "ops", "kind": "slack", "config": {"url": SLACK}},
                          format="json").json()
    path = f"/api/channels/{created['id']}/"
    client.patch(path, {"config": {"url": "********"}}, format="json")  # the mask: nothing changes
    client.patch(path, {"config": {"url": OTHER_SLACK}, "enabled": False}, format="json")
    client.delete(path)

    assert trail("channel") == [
        ("create", "ops", "staff", "api", {"name": [None, "ops"], "kind": [None, "slack"], "enabled": [None, True],
                                           "config": [None, {"url": "•••"}], "shared": [None, False]}),
        ("change", "ops", "staff", "api", {"enabled": [True, False],
                                           "config": [{"url": "•••"}, {"url": "••• (changed)"}]}),
        ("delete", "ops", "staff", "api", {"name": ["ops", None], "kind": ["slack", None], "enabled": [False, None],
                                           "config": [{"url": "•••"}, None], "shared": [False, None]}),
    ]
    assert work_entries().get(action="create", subject="channel").actor == people.staff
    assert_no_secret()


def test_the_api_records_a_users_rules(people):
    channel = Channel.objects.create(name="ops", kind="email", config={"recipients": ["ops@example.com"]}, shared=True)
    client = people.client(people.owner)
    rule = client.post("/api/rules/", {"channel": channel.pk, "events": ["failed"], "scope": "job",
                                       "job": people.job.pk}, format="json").json()
    client.patch(f"/api/rules/{rule['id']}/", {"events": ["failed", "lost"]}, format="json")
    client.delete(f"/api/rules/{rule['id']}/")

    name = "job nightly-report -> ops"
    assert [entry[:4] for entry in trail("rule")] == [("create", name, "owner", "api"),
                                                      ("change", name, "owner", "api"),
                                                      ("delete", name, "owner", "api")]
    assert trail("rule")[1][4] == {"events": [["failed"], ["failed", "lost"]]}
    assert not Rule.objects.exists()


def test_the_admin_records_channels_and_rules(client):
    root = User.objects.create_superuser("root")
    client.force_login(root)
    added = client.post("/admin/notifications/channel/add/", {
        "name": "ops", "kind": "slack", "enabled": "on", "config": json.dumps({"url": SLACK})})
    assert added.status_code == 302, added.content.decode()[:2000]
    channel = Channel.objects.get()
    rule = client.post("/admin/notifications/rule/add/", {"channel": channel.pk, "events": ["failed", "lost"],
                                                          "scope": "all", "enabled": "on"})
    assert rule.status_code == 302, rule.content.decode()[:2000]
    deleted = client.post(f"/admin/notifications/channel/{channel.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302

    assert [entry[:4] for entry in trail("channel")] == [("create", "ops", "root", "admin"),
                                                         ("delete", "ops", "root", "admin")]
    assert [entry[:4] for entry in trail("rule")] == [("create", "all jobs -> ops", "root", "admin")]
    assert trail("rule")[0][4]["events"] == [None, ["failed", "lost"]]
    assert work_entries().get(subject="channel", action="delete").detail == "with its 1 rule(s)"
    assert_no_secret()


def test_a_jobs_file_records_what_it_applies_and_prunes(tmp_path, monkeypatch):
    monkeypatch.setenv("OPS_SLACK_URL", SLACK)
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: []\nchannels:\n- {name: ops, kind: slack, config: {url_env: OPS_SLACK_URL}}\n"
                    "rules:\n- {channel: ops, events: [lost]}\n")
    call_command("jobs", "apply", str(path), stdout=StringIO())
    call_command("jobs", "apply", str(path), stdout=StringIO())  # no changes: no entries
    path.write_text("jobs: []\nchannels: []\nrules: []\n")
    call_command("jobs", "apply", str(path), "--prune", stdout=StringIO())

    entries = work_entries().order_by("id")
    assert [(e.subject, e.action, e.source, e.detail) for e in entries] == [
        ("channel", "create", "cli", "jobs apply"), ("rule", "create", "cli", "jobs apply"),
        ("rule", "delete", "cli", "jobs apply --prune"), ("channel", "delete", "cli", "jobs apply --prune")]
    assert all(e.actor_name.endswith("(OS user)") for e in entries)
    assert_no_secret()
