"""The limits page (everyone reads, staff change, each change audited) and what the run page says of
a run waiting for its limit."""

import pytest

from audit.models import AuditEntry, Subject
from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, Limit

from .api_personas import browser

pytestmark = pytest.mark.django_db


def test_everyone_sees_the_shared_limits_and_what_runs_under_them(people):
    Limit.objects.create(key="warehouse", max_running=3, max_starts_per_minute=12, shared=True)
    page = browser(people.owner).get("/limits/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "warehouse" in text and "0 of 3" in text and "at most 12" in text
    assert "/limits/warehouse/edit/" not in text


def test_staff_create_change_and_delete_a_limit_with_entries(people):
    staff = browser(people.staff)
    made = staff.post("/limits/new/", {"key": "warehouse", "max_running": "2", "max_starts_per_minute": ""})
    assert made.status_code == 302
    assert staff.post("/limits/warehouse/edit/", {"key": "warehouse", "max_running": "5"}).status_code == 302
    assert Limit.objects.get(key="warehouse").max_running == 5
    assert staff.post("/limits/warehouse/delete/").status_code == 302
    assert not Limit.objects.exists()
    assert list(AuditEntry.objects.filter(subject=Subject.LIMIT).order_by("id").values_list("action", "source")) == [
        ("create", "page"), ("change", "page"), ("delete", "page")]


def test_a_bad_value_is_shown_on_the_form_and_nothing_saved(people):
    answer = browser(people.staff).post("/limits/new/", {"key": "no spaces", "max_running": "0"})
    assert answer.status_code == 200
    assert "field-error" in answer.content.decode() or "errorlist" in answer.content.decode()
    assert not Limit.objects.exists()


def test_others_may_not_change_shared_limits(people):
    Limit.objects.create(key="warehouse", max_running=3, shared=True)
    owner = browser(people.owner)
    assert owner.post("/limits/warehouse/edit/", {"key": "warehouse", "max_running": "9"}).status_code == 403
    assert owner.post("/limits/warehouse/delete/").status_code == 403
    assert Limit.objects.get().max_running == 3
    assert browser(people.staff).get("/limits/").status_code == 200
    assert owner.post("/limits/new/", {"key": "mine", "max_running": "9"}).status_code == 302
    assert Limit.objects.get(key="mine").owner == people.owner


def test_a_limit_named_by_a_job_is_not_deleted_from_the_page(people):
    Limit.objects.create(key="warehouse", max_running=3)
    save_job(Job(name="loader", kind="callable", target="builtin.noop", limit_key="warehouse"), {"type": "manual"})
    answer = browser(people.staff).post("/limits/warehouse/delete/", follow=True)
    assert "loader" in answer.content.decode()
    assert Limit.objects.exists()


def test_the_run_page_says_what_a_run_waits_for(people):
    Limit.objects.create(key="warehouse", max_running=1)
    job = save_job(Job(name="loader", kind="callable", target="builtin.noop", limit_key="warehouse",
                       owner=people.owner), {"type": "manual"})
    first, second = lifecycle.create_run(job), lifecycle.create_run(job)
    lifecycle.claim(first.pk, 1, "w1@host", 1)
    lifecycle.claim(second.pk, 1, "w1@host", 1)
    text = browser(people.owner).get(f"/runs/{second.pk}/").content.decode()
    assert "waiting for warehouse (1 of 1 running)" in text
    assert "Waited for its limit" in text
    job_page = browser(people.owner).get(f"/jobs/{job.pk}/").content.decode()
    assert 'href="/limits/#limit-warehouse">warehouse</a>' in job_page
    assert "(waiting for its limit" in job_page
    assert "(waiting for its limit" in browser(people.owner).get("/runs/").content.decode()


def test_the_admin_creates_changes_and_bulk_deletes_limits_through_their_actions(people):
    people.staff.is_superuser = True
    people.staff.save()
    admin = browser(people.staff)
    assert admin.post("/admin/jobs/limit/add/", {"key": "warehouse", "max_running": "2", "max_starts_per_minute": "",
                                                "description": ""}).status_code == 302
    limit = Limit.objects.get(key="warehouse")
    assert admin.post(f"/admin/jobs/limit/{limit.pk}/change/", {
        "key": "warehouse", "max_running": "4", "max_starts_per_minute": "", "description": ""}).status_code == 302
    assert Limit.objects.get(key="warehouse").max_running == 4
    Limit.objects.create(key="partner-api", max_running=1)
    deleted = admin.post("/admin/jobs/limit/", {"action": "delete_selected", "post": "yes",
                                                "_selected_action": list(Limit.objects.values_list("pk", flat=True))})
    assert deleted.status_code == 302 and not Limit.objects.exists()
    assert sorted(AuditEntry.objects.filter(subject=Subject.LIMIT, source="admin").values_list("action", "job_name")) == [
        ("change", "warehouse"), ("create", "warehouse"), ("delete", "partner-api"), ("delete", "warehouse")]
