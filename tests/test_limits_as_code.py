"""The limits: section of a jobs file: applied before the jobs, so a job of the same file may name a
limit it defines; staff's to change; exported and applied back unchanged."""

import pytest
import yaml
from django.contrib.auth.models import Permission

from audit.models import AuditEntry, Subject
from jobs.models import Job, Limit

from .test_api_jobs_as_code import apply

pytestmark = pytest.mark.django_db

FILE = """\
limits:
- key: warehouse
  max_running: 3
- key: partner-api
  max_running: 10
  max_starts_per_minute: 20
  description: the partner's API allows 20 calls a minute
jobs:
- name: load
  kind: callable
  target: builtin.noop
  limit_key: warehouse
  schedule: {type: manual}
"""


def texts(answer):
    return [error["text"] for error in answer.json()["errors"]]


def test_a_file_defines_limits_and_a_job_that_names_one(people):
    answer = apply(people.client(people.staff), FILE)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["plan"][:2] == ["+ create limit warehouse", "+ create limit partner-api"]
    assert Job.objects.get(name="load").limit_key == "warehouse"
    assert Limit.objects.get(key="partner-api").max_starts_per_minute == 20
    assert set(AuditEntry.objects.filter(subject=Subject.LIMIT).values_list("job_name", "detail")) == {
        ("warehouse", "jobs apply"), ("partner-api", "jobs apply")}


def test_an_export_holds_the_limits_and_applies_back_unchanged(people):
    staff = people.client(people.staff)
    apply(staff, FILE)
    exported = staff.get("/api/jobs-as-code/").json()["text"]
    assert yaml.safe_load(exported)["limits"][0] == {"key": "partner-api", "max_running": 10,
                                                     "max_starts_per_minute": 20,
                                                     "description": "the partner's API allows 20 calls a minute"}
    again = apply(staff, exported).json()
    assert again["applied"] is False
    assert "= limits unchanged: 2" in again["plan"]


def test_a_change_updates_the_limit_and_a_field_left_out_goes_back_to_its_default(people):
    staff = people.client(people.staff)
    apply(staff, FILE)
    changed = FILE.replace("max_running: 3", "max_running: 4").replace("  max_starts_per_minute: 20\n", "")
    plan = apply(staff, changed).json()["plan"]
    assert "~ update limit warehouse: max_running: 3 -> 4" in plan
    assert "~ update limit partner-api: max_starts_per_minute: 20 -> null" in plan
    assert Limit.objects.get(key="partner-api").max_starts_per_minute is None


def test_a_job_naming_no_limit_and_bad_limits_are_errors_with_their_place(people):
    staff = people.client(people.staff)
    bad = FILE.replace("max_running: 3", "max_running: 0").replace("key: partner-api", "key: partner api") \
        .replace("limit_key: warehouse", "limit_key: nowhere")
    answer = apply(staff, bad)
    assert answer.status_code == 400
    errors = texts(answer)
    assert any("limits[0]" in line and "max_running" in line for line in errors)
    assert any("limits[1]" in line and "key" in line for line in errors)
    assert not Limit.objects.exists()
    nowhere = apply(staff, FILE.split("jobs:\n")[0].replace("warehouse", "lake") + "jobs:\n" + FILE.split("jobs:\n")[1])
    assert nowhere.status_code == 400
    assert any("jobs[0] (name: load)" in line and "No limit has the key 'warehouse'" in line
               for line in texts(nowhere))
    assert not Limit.objects.exists() and not Job.objects.filter(name="load").exists()


def test_a_users_file_makes_their_own_limits_and_leaves_shared_ones_to_staff(people):
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    assert apply(people.client(people.owner), FILE).status_code == 200
    assert Limit.objects.get(key="warehouse").owner == people.owner
    Limit.objects.filter(key="warehouse").update(shared=True, owner=None)
    changed = apply(people.client(people.owner), FILE.replace("max_running: 3", "max_running: 7"))
    assert changed.status_code == 400
    assert "Only staff may change or delete a shared limit" in texts(changed)[0]
    unchanged = FILE.replace("name: load", "name: load-mine")
    assert apply(people.client(people.owner), unchanged).status_code == 200


def test_prune_keeps_a_limit_that_a_job_still_names(people):
    staff = people.client(people.staff)
    apply(staff, FILE)
    answer = apply(staff, "limits: []\njobs:\n" + FILE.split("jobs:\n")[1], prune=True)
    assert answer.status_code == 400
    assert any("delete limit warehouse" in line and "load" in line for line in texts(answer))
    assert Limit.objects.count() == 2
