"""The notification rules' pages: a rule made, changed and deleted through the API's serializer and
the rule actions (each an audit entry), bad input answered with the API's message and what was
typed kept, another team's rule and channel out of reach, all jobs and tags staff's."""

import pytest

from audit.models import AuditEntry, Subject
from notifications.models import Channel, Rule

from .api_personas import browser, make_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    personas = make_personas()
    personas.mail = Channel.objects.create(name="team-mail", kind="email", config={"recipients": ["t@example.com"]},
                                           owner=personas.owner, group=personas.team)
    personas.theirs = Channel.objects.create(name="their-mail", kind="email",
                                             config={"recipients": ["o@example.com"]}, owner=personas.outsider)
    return personas


def rule_post(people, **changes):
    return {"channel": people.mail.pk, "events": ["failed", "timed_out"], "scope": "job", "job": people.job.pk,
            "enabled": "on", **changes}


def test_an_owner_makes_changes_and_deletes_a_rule_for_their_job(people):
    owner = browser(people.owner)
    form = owner.get(f"/rules/new/?job={people.job.pk}").content.decode()
    assert "Create the rule" in form and f'<option value="{people.job.pk}" selected>nightly-report' in form
    assert "their-mail" not in form  # another team's channel is not offered
    assert f"/rules/new/?job={people.job.pk}" in owner.get(f"/jobs/{people.job.pk}/").content.decode()
    answer = owner.post("/rules/new/", rule_post(people))
    assert answer.status_code == 302 and answer["Location"] == "/rules/"
    rule = Rule.objects.get()
    assert (rule.channel, rule.events, rule.job, rule.owner) == (people.mail, ["failed", "timed_out"], people.job,
                                                                 people.owner)
    listed = owner.get("/rules/").content.decode()
    assert f"/rules/{rule.pk}/edit/" in listed and "failed, timed_out" in listed
    edit = owner.get(f"/rules/{rule.pk}/edit/").content.decode()
    assert "Save" in edit and 'value="timed_out" checked' in edit
    answer = owner.post(f"/rules/{rule.pk}/edit/", rule_post(people, events=["succeeded"], enabled=""))
    assert answer.status_code == 302
    rule.refresh_from_db()
    assert rule.events == ["succeeded"]  # an unticked box is off
    assert owner.post(f"/rules/{rule.pk}/delete/").status_code == 302
    assert not Rule.objects.exists()
    assert list(AuditEntry.objects.filter(subject=Subject.RULE).order_by("pk").values_list("action", "source")) == [
        ("create", "page"), ("change", "page"), ("delete", "page")]


@pytest.mark.parametrize("changes, message", [
    ({"events": []}, "This list may not be empty."),
    ({"events": ["failed", "exploded"]}, "&quot;exploded&quot; is not a valid choice."),
    ({"scope": "all"}, "Only staff may add rules for all jobs or a tag"),
    ({"job": "999999"}, "Invalid pk"),
    ({"job": "1; DROP TABLE jobs_job"}, "Incorrect type."),
    ({"channel": ""}, "This field may not be null."),
])
def test_bad_input_shows_the_apis_message_and_keeps_what_was_typed(people, changes, message):
    answer = browser(people.owner).post("/rules/new/", rule_post(people, **changes))
    assert answer.status_code == 400
    text = answer.content.decode()
    assert message in text
    assert 'value="failed" checked' in text or "failed" not in changes.get("events", ["failed"])
    assert not Rule.objects.exists()


def test_another_teams_rule_and_channel_are_out_of_reach(people):
    outsider_job_rule = Rule.objects.create(channel=people.theirs, events=["failed"], scope="all",
                                            owner=people.outsider)
    owner = browser(people.owner)
    assert owner.get(f"/rules/{outsider_job_rule.pk}/edit/").status_code == 404
    assert owner.post(f"/rules/{outsider_job_rule.pk}/edit/", rule_post(people)).status_code == 404
    assert owner.post(f"/rules/{outsider_job_rule.pk}/delete/").status_code == 404
    assert f"/rules/{outsider_job_rule.pk}/" not in owner.get("/rules/").content.decode()
    answer = owner.post("/rules/new/", rule_post(people, channel=people.theirs.pk))
    assert answer.status_code == 400 and "Invalid pk" in answer.content.decode()
    outsider = browser(people.outsider)  # not in the job's team: the job is not theirs to watch
    answer = outsider.post("/rules/new/", rule_post(people, channel=people.theirs.pk))
    assert answer.status_code == 400 and "Invalid pk" in answer.content.decode()
    assert Rule.objects.count() == 1


def test_a_teammate_may_not_give_a_rule_another_teams_group_and_staff_watch_a_tag(people):
    answer = browser(people.owner).post("/rules/new/", rule_post(people, group="others"))
    assert answer.status_code == 400 and not Rule.objects.exists()
    staff = browser(people.staff)
    assert '<option value="tag">' in staff.get("/rules/new/").content.decode()
    assert staff.post("/rules/new/", rule_post(people, scope="tag", tag="")).status_code == 400
    assert staff.post("/rules/new/", rule_post(people, scope="tag", tag="reports")).status_code == 302
    rule = Rule.objects.get()
    assert (rule.scope, rule.tag, rule.job) == ("tag", "reports", None)
