"""Notification rules in the API: staff manage every rule; other users add, change and remove
rules for the jobs they can see (scope job) on an existing channel, and see only those."""

import pytest
from rest_framework.test import APIClient

from jobs.definitions.jobs import save_job
from jobs.models import Job
from notifications.models import Channel, Rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def channel():
    return Channel.objects.create(name="ops", kind="email", config={"recipients": ["ops@example.com"]}, shared=True)


def test_staff_add_a_rule_for_a_tag(people, channel):
    response = people.client(people.staff).post(
        "/api/rules/", {"channel": channel.pk, "events": ["failed", "timed_out"], "scope": "tag", "tag": "reports"},
        format="json")
    assert response.status_code == 201, response.json()
    rule = Rule.objects.get()
    assert (rule.channel, rule.events, rule.scope, rule.tag, rule.job) == (channel, ["failed", "timed_out"], "tag",
                                                                          "reports", None)
    assert response.json()["channel_name"] == "ops"


def test_an_owner_adds_a_rule_for_their_job_and_sees_it(people, channel):
    owner = people.client(people.owner)
    response = owner.post("/api/rules/", {"channel": channel.pk, "events": ["failed"], "scope": "job",
                                          "job": people.job.pk}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["job_name"] == "nightly-report"
    Rule.objects.create(channel=channel, events=["missed"])  # staff's rule for all jobs
    listed = owner.get("/api/rules/").json()["results"]
    assert [(r["scope"], r["job"]) for r in listed] == [("job", people.job.pk)]
    teammate = people.client(people.teammate).get("/api/rules/").json()["results"]
    assert [r["id"] for r in teammate] == [response.json()["id"]]
    assert people.client(people.staff).get("/api/rules/").json()["count"] == 2


def test_a_user_who_is_not_staff_cannot_add_rules_for_everyone_or_for_others_jobs(people, channel):
    outsider = people.client(people.outsider)
    for_all = outsider.post("/api/rules/", {"channel": channel.pk, "events": ["failed"], "scope": "all"},
                            format="json")
    assert for_all.status_code == 400
    assert "Only staff" in for_all.json()["scope"][0]
    by_tag = outsider.post("/api/rules/", {"channel": channel.pk, "events": ["failed"], "scope": "tag",
                                           "tag": "reports"}, format="json")
    assert by_tag.status_code == 400
    others = outsider.post("/api/rules/", {"channel": channel.pk, "events": ["failed"], "scope": "job",
                                           "job": people.job.pk}, format="json")
    assert others.status_code == 400 and "job" in others.json()
    assert not Rule.objects.exists()


def test_a_user_changes_and_deletes_only_their_rules(people, channel):
    mine = Rule.objects.create(channel=channel, events=["failed"], scope="job", job=people.job)
    global_rule = Rule.objects.create(channel=channel, events=["failed"])
    owner = people.client(people.owner)
    changed = owner.patch(f"/api/rules/{mine.pk}/", {"events": ["failed", "sla_overrun"]}, format="json")
    assert changed.status_code == 200, changed.json()
    mine.refresh_from_db()
    assert mine.events == ["failed", "sla_overrun"]
    assert owner.patch(f"/api/rules/{mine.pk}/", {"scope": "all"}, format="json").status_code == 400
    assert owner.patch(f"/api/rules/{global_rule.pk}/", {"enabled": False}, format="json").status_code == 404
    assert owner.delete(f"/api/rules/{global_rule.pk}/").status_code == 404
    assert people.client(people.outsider).delete(f"/api/rules/{mine.pk}/").status_code == 404
    assert owner.delete(f"/api/rules/{mine.pk}/").status_code == 204
    assert list(Rule.objects.all()) == [global_rule]


@pytest.mark.parametrize(("body", "field"), [
    ({"events": []}, "events"),
    ({"events": ["exploded"]}, "events"),
    ({"events": ["digest"]}, "events"),
    ({"events": ["failed"], "scope": "tag"}, "tag"),
    ({"events": ["failed"], "scope": "job"}, "job"),
    ({"events": ["failed"], "channel": 999999}, "channel"),
    ({"events": ["failed"], "scope": "everything"}, "scope"),
])
def test_bad_rules_get_a_message_per_field(people, channel, body, field):
    people.staff_post_refused("/api/rules/", {"channel": channel.pk, **body}, field, Rule)


def test_a_staff_rule_changed_to_all_jobs_forgets_its_job(people, channel):
    rule = Rule.objects.create(channel=channel, events=["failed"], scope="job", job=people.job)
    response = people.client(people.staff).patch(f"/api/rules/{rule.pk}/", {"scope": "all"}, format="json")
    assert response.status_code == 200
    rule.refresh_from_db()
    assert (rule.scope, rule.job) == ("all", None)


def test_rules_filter_by_channel_and_job(people, channel):
    other = Channel.objects.create(name="hook", kind="webhook", config={"url": "https://a.example/h"})
    job = save_job(Job(name="second", kind="callable", target="builtin.echo"), {"type": "manual"})
    Rule.objects.create(channel=channel, events=["failed"], scope="job", job=people.job)
    Rule.objects.create(channel=other, events=["failed"], scope="job", job=job)
    staff = people.client(people.staff)
    assert [r["job"] for r in staff.get(f"/api/rules/?channel={other.pk}").json()["results"]] == [job.pk]
    assert [r["channel"] for r in staff.get(f"/api/rules/?job={people.job.pk}").json()["results"]] == [channel.pk]
    assert staff.get("/api/rules/?job=abc").status_code == 400
    assert APIClient().get("/api/rules/").status_code == 401


@pytest.mark.django_db
def test_a_job_id_past_a_bigint_is_a_400_not_a_server_error(admin_client):
    answer = admin_client.get(f"/api/rules/?job={2**99}")
    assert answer.status_code == 400 and "job" in answer.json()
    assert admin_client.get(f"/api/runs/?job={2**99}").status_code == 400
