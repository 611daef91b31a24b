"""Channels and rules in jobs-as-code files (``channels:``, ``rules:``): plan, apply and prune through
``manage.py jobs apply`` and the API, secrets never printed, rules naming what does not exist."""

from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from jobs.definitions.jobs import save_job
from jobs.models import Job
from notifications.models import Channel, Rule

from .api_personas import make_personas
from .test_notifications_support import grant_channel_permissions, opened_config

pytestmark = pytest.mark.django_db

SLACK = "https://hooks.slack.com/services/T000/B000/very-secret-token"
OTHER_SLACK = "https://hooks.slack.com/services/T000/B000/another-secret"

FILE = """\
jobs:
- name: nightly
  kind: callable
  target: builtin.noop
channels:
- name: ops-slack
  kind: slack
  config:
    url_env: OPS_SLACK_URL
- name: ops-mail
  kind: email
  config: {recipients: [ops@example.com]}
rules:
- channel: ops-slack
  events: [failed, timed_out]
- channel: ops-mail
  events: [missed]
  scope: job
  job: nightly
"""


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("jobs", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def write(tmp_path, text, name="jobs.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def slack_url(monkeypatch):
    monkeypatch.setenv("OPS_SLACK_URL", SLACK)


def test_it_plans_applies_and_reapplies_channels_and_rules_with_the_secret_from_the_environment(tmp_path, slack_url):
    path = write(tmp_path, FILE)

    planned = run("apply", path, "--dry-run")
    applied = run("apply", path)

    assert "+ create channel ops-slack" in planned and "+ create rule all -> ops-slack" in planned
    assert "+ create rule job nightly -> ops-mail" in applied
    assert applied.splitlines()[-1] == "applied: 5 created, 0 updated, 0 deleted."
    slack = Channel.objects.get(name="ops-slack")
    assert (slack.kind, opened_config(slack)) == ("slack", {"url": SLACK})
    rule = Rule.objects.get(channel__name="ops-mail")
    assert (rule.scope, rule.job.name, rule.events) == ("job", "nightly", ["missed"])
    assert run("apply", path).splitlines()[-1] == "no changes"

    exported = run("export", "-")
    assert "url: '********'" in exported and "events:\n  - failed\n  - timed_out" in exported
    assert run("apply", write(tmp_path, exported, "exported.yaml")).splitlines()[-1] == "no changes"
    for text in (planned, applied, exported):
        assert "very-secret-token" not in text
    assert not any("very-secret" in str(entry.changes) for entry in AuditEntry.objects.all())


def test_a_changed_secret_is_named_and_never_shown(tmp_path, slack_url, monkeypatch):
    run("apply", write(tmp_path, FILE))
    monkeypatch.setenv("OPS_SLACK_URL", OTHER_SLACK)

    output = run("apply", write(tmp_path, FILE.replace("[failed, timed_out]", "[failed]")))

    assert "~ update channel ops-slack: config.url (secret) changed" in output
    assert '~ update rule all -> ops-slack: events: ["failed", "timed_out"] -> ["failed"]' in output
    assert "secret-token" not in output and "another-secret" not in output
    assert opened_config(Channel.objects.get(name="ops-slack")) == {"url": OTHER_SLACK}


def test_prune_deletes_the_channels_and_rules_missing_from_the_file(tmp_path, slack_url):
    run("apply", write(tmp_path, FILE))
    without_mail = FILE[:FILE.index("- name: ops-mail")] + "rules:\n- channel: ops-slack\n  events: [failed]\n"

    output = run("apply", write(tmp_path, without_mail), "--prune")

    assert "- delete rule job nightly -> ops-mail" in output and "- delete channel ops-mail" in output
    assert list(Channel.objects.values_list("name", flat=True)) == ["ops-slack"]
    assert list(Rule.objects.values_list("events", flat=True)) == [["failed"]]


def test_a_rule_naming_an_unknown_channel_or_job_is_an_error_naming_the_line(tmp_path, slack_url):
    text = FILE.replace("- channel: ops-slack\n", "- channel: ops-pager\n").replace("job: nightly", "job: weekly")

    with pytest.raises(CommandError) as error:
        run("apply", write(tmp_path, text))

    message = str(error.value)
    assert "line 14: rules[0]: channel: no channel named \"ops-pager\", in the file or the database." in message
    assert "line 16: rules[1]: job: no job named \"weekly\" that you can see, in the file or the database." in message
    assert not Channel.objects.exists() and not Job.objects.exists()


def test_a_missing_environment_variable_is_an_error_and_a_secret_in_an_error_is_masked(tmp_path):
    with pytest.raises(CommandError, match="line 6: channels\\[0\\] \\(name: ops-slack\\): config.url_env: the "
                                           "environment variable OPS_SLACK_URL is not set."):
        run("apply", write(tmp_path, FILE))

    bad = FILE.replace("url_env: OPS_SLACK_URL", "url: 'https://hooks.slack.com/x y-secret'")
    with pytest.raises(CommandError) as error:
        run("apply", write(tmp_path, bad))
    assert "channels[0] (name: ops-slack): config: url: The URL must not contain spaces" in str(error.value)
    assert "y-secret" not in str(error.value)


@pytest.fixture
def people():
    personas = make_personas()
    grant_channel_permissions(personas.staff)  # staff who manage channels
    return personas


def post(client, text, **options):
    return client.post("/api/jobs-as-code/", {"text": text, **options}, format="json")


def test_staff_apply_channels_and_rules_through_the_api_and_never_read_the_secret_back(people):
    text = FILE.replace("url_env: OPS_SLACK_URL", f"url: {SLACK}")
    staff = people.client(people.staff)

    answer = post(staff, text)

    assert answer.status_code == 200, answer.json()
    assert "+ create channel ops-slack" in answer.json()["plan"] and "very-secret" not in answer.content.decode()
    assert opened_config(Channel.objects.get(name="ops-slack")) == {"url": SLACK}
    exported = staff.get("/api/jobs-as-code/").json()["text"]
    assert "very-secret" not in exported and "ops-slack" in exported
    assert post(staff, exported, prune=True).json()["applied"] is False

    refused = post(staff, FILE)  # the server's environment is not the client's
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["entry"] == "channels[0]"
    assert "values from the environment are read by `manage.py jobs apply` only" in refused.json()["errors"][0]["text"]


def test_a_user_applies_rules_for_their_own_jobs_and_no_channels(people):
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    Channel.objects.create(name="ops-mail", kind="email", config={"recipients": ["ops@example.com"]}, shared=True)
    save_job(Job(name="theirs", kind="callable", target="builtin.noop"))
    owner = people.client(people.owner)
    jobs = "jobs:\n- {name: nightly-report, kind: callable, target: builtin.noop, group: team}\n"

    mine = post(owner, jobs + "rules:\n- {channel: ops-mail, events: [failed], scope: job, job: nightly-report}\n")
    assert mine.status_code == 200, mine.json()
    assert Rule.objects.get().job == people.job

    for extra, message in [
        ("rules:\n- {channel: ops-mail, events: [failed], scope: job, job: theirs}\n",
         'job: no job named "theirs" that you can see'),
        ("rules:\n- {channel: ops-mail, events: [failed]}\n", "scope: Only staff may add rules for all jobs"),
        ("channels:\n- {name: mine, kind: email, config: {recipients: [me@example.com]}}\n",
         "channels: you may not apply channels: that needs the notifications.add_channel"),
    ]:
        answer = post(owner, jobs + extra)
        assert answer.status_code == 400 and message in answer.json()["errors"][0]["text"], answer.json()


def test_a_file_applies_channels_with_the_channel_permissions_not_staff(people):
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    owner = people.client(grant_channel_permissions(people.owner, "view", "add"))  # not staff
    text = "jobs: []\nchannels:\n- {name: ops-mail, kind: email, config: {recipients: [ops@example.com]}}\n"

    created = post(owner, text)
    assert created.status_code == 200, created.json()
    assert list(Channel.objects.values_list("name", flat=True)) == ["ops-mail"]
    assert "ops-mail" in owner.get("/api/jobs-as-code/").json()["text"]

    changed = post(owner, text.replace("ops@", "oncall@"))
    assert changed.status_code == 400
    assert "needs the notifications.change_channel permission" in changed.json()["errors"][0]["text"]
    pruned = post(owner, "jobs: []\nchannels: []\n", prune=True)
    assert pruned.status_code == 400
    assert "needs the notifications.delete_channel permission" in pruned.json()["errors"][0]["text"]
    assert Channel.objects.get().config == {"recipients": ["ops@example.com"]}
