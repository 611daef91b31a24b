"""Maintenance windows through the API and jobs files: made by a team's member over the team's jobs,
read by the team, hidden from others (404), each bad input a 400 naming its field, every change
audited; a shared one seen by everybody; the same checks from a jobs file."""

import pytest
from rest_framework.test import APIClient

from audit.models import Action, AuditEntry, Subject
from jobs.models import Window

ONE_OFF = {"name": "db-upgrade", "mode": "hold", "starts_at": "2026-12-01T02:00:00Z",
           "ends_at": "2026-12-01T04:00:00Z"}
WEEKLY = {"name": "sunday-night", "mode": "mute", "cron": "0 2 * * 0", "duration_seconds": 7200,
          "timezone": "Europe/Berlin", "tags": ["reports"]}


def test_a_member_makes_a_window_over_the_teams_job_the_team_reads_it_and_others_get_404(people):
    owner = people.client(people.owner)

    made = owner.post("/api/windows/", {**ONE_OFF, "jobs": [people.job.pk], "group": "team"}, format="json")

    assert made.status_code == 201, made.json()
    assert (made.json()["jobs"], made.json()["owner"], made.json()["group"]) == ([people.job.pk], "owner", "team")
    teammate = people.client(people.teammate)
    assert teammate.get("/api/windows/db-upgrade/").json()["starts_at"] == "2026-12-01T02:00:00Z"
    assert teammate.patch("/api/windows/db-upgrade/", {"ends_at": "2026-12-01T05:00:00Z"},
                          format="json").status_code == 200
    outsider = people.client(people.outsider)
    assert outsider.get(f"/api/windows/{made.json()['id']}/").status_code == 404
    assert outsider.get("/api/windows/db-upgrade/").status_code == 404
    assert outsider.patch("/api/windows/db-upgrade/", {"mode": "mute"}, format="json").status_code == 404
    assert outsider.delete("/api/windows/db-upgrade/").status_code == 404
    assert outsider.get("/api/windows/").json()["results"] == []
    assert APIClient().get("/api/windows/").status_code in (401, 403)
    recurring = owner.post("/api/windows/", WEEKLY, format="json")
    assert recurring.status_code == 201, recurring.json()
    assert [w["name"] for w in owner.get("/api/windows/?mode=mute").json()["results"]] == ["sunday-night"]
    assert owner.delete("/api/windows/db-upgrade/").status_code == 204
    actions = list(AuditEntry.objects.filter(subject=Subject.WINDOW).order_by("id")
                   .values_list("action", "job_name", "actor__username"))
    assert actions == [(Action.CREATE, "db-upgrade", "owner"), (Action.CHANGE, "db-upgrade", "teammate"),
                       (Action.CREATE, "sunday-night", "owner"), (Action.DELETE, "db-upgrade", "owner")]


def test_a_shared_window_is_seen_by_everybody_and_changed_by_staff_only(people):
    made = people.client(people.staff).post("/api/windows/", {**WEEKLY, "shared": True}, format="json")
    assert made.status_code == 201, made.json()

    outsider = people.client(people.outsider)
    assert outsider.get("/api/windows/sunday-night/").status_code == 200
    assert outsider.patch("/api/windows/sunday-night/", {"mode": "hold"}, format="json").status_code == 403
    assert people.client(people.owner).post("/api/windows/", {**ONE_OFF, "shared": True},
                                            format="json").status_code == 400
    assert Window.objects.get().mode == "mute"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"ends_at": "2026-12-01T01:00:00Z"}, "ends_at", "after the start"),
    ({"cron": "0 2 * * 0", "duration_seconds": 60}, "non_field_errors", "not both"),
    ({"starts_at": None, "ends_at": None}, "non_field_errors", "Give starts_at and ends_at"),
    ({"starts_at": None, "ends_at": None, "cron": "61 * * * *", "duration_seconds": 60}, "cron", "not a valid cron"),
    ({"starts_at": None, "ends_at": None, "cron": "0 2 * * *", "duration_seconds": 60, "timezone": "Mars/Base"},
     "timezone", "not a known IANA timezone"),
    ({"starts_at": None, "ends_at": None, "cron": "0 2 * * *", "duration_seconds": 0}, "duration_seconds", "Between 1"),
    ({"starts_at": None, "ends_at": None, "cron": "0 2 * * *", "duration_seconds": 8 * 86400}, "duration_seconds",
     "Between 1"),
    ({"mode": "pause"}, "mode", "not a valid choice"),
    ({"starts_at": "yesterday"}, "starts_at", "Datetime has wrong format"),
    ({"name": "x" * 500}, "name", "no more than 100"),
    ({"name": "db'; DROP TABLE jobs_job;--"}, "name", "Letters, digits"),
    ({"tags": ["a\x00b"]}, "tags", "Null characters"),
    ({"cron": "0 2 * * *", "starts_at": None, "ends_at": None, "duration_seconds": 60, "timezone": "UTC\x00"}, "timezone",
     "Null characters"),
    ({"jobs": list(range(1, 1200))}, "jobs", "at most 1000"),
])
def test_bad_input_is_a_400_naming_the_field(people, change, field, words):
    answer = people.client(people.owner).post("/api/windows/", {**ONE_OFF, **change}, format="json")

    assert answer.status_code == 400, answer.json()
    assert words in str(answer.json()[field]), answer.json()
    assert not Window.objects.exists()


def test_another_teams_job_is_refused_as_unknown_whether_it_exists_or_not(people):
    outsider = people.client(people.outsider)

    theirs = outsider.post("/api/windows/", {**ONE_OFF, "jobs": [people.job.pk]}, format="json")
    missing = outsider.post("/api/windows/", {**ONE_OFF, "jobs": [people.job.pk + 1000]}, format="json")

    assert theirs.status_code == missing.status_code == 400
    assert theirs.json()["jobs"] == [f"No job with the id {people.job.pk}."]
    assert missing.json()["jobs"] == [f"No job with the id {people.job.pk + 1000}."]
    assert not Window.objects.exists()


FILE = """
windows:
  - name: sunday-night
    mode: mute
    cron: "0 2 * * 0"
    duration_seconds: 7200
    timezone: Europe/Berlin
    tags: [reports]
  - name: db-upgrade
    starts_at: 2026-12-01T02:00:00Z
    ends_at: 2026-12-01T04:00:00Z
jobs: []
"""


def test_a_jobs_file_defines_windows_checked_as_the_api_checks_them(people):
    staff = people.client(people.staff)

    applied = staff.post("/api/jobs-as-code/", {"text": FILE}, format="json")

    assert applied.status_code == 200, applied.json()
    assert applied.json()["plan"][:2] == ["+ create window sunday-night", "+ create window db-upgrade"]
    assert Window.objects.get(name="db-upgrade").mode == "hold"
    again = staff.post("/api/jobs-as-code/", {"text": FILE}, format="json").json()
    assert again["applied"] is False, again
    exported = staff.get("/api/jobs-as-code/").json()["text"]
    assert "windows:" in exported and "cron: 0 2 * * 0" in exported
    bad = staff.post("/api/jobs-as-code/", {"text": FILE.replace("04:00:00Z", "01:00:00Z")}, format="json")
    assert bad.status_code == 400
    assert any("ends_at" in error["message"] and "after the start" in error["message"]
               for error in bad.json()["errors"]), bad.json()
    assert str(Window.objects.get(name="db-upgrade").ends_at) == "2026-12-01 04:00:00+00:00"


def test_the_pages_make_and_list_windows_and_the_job_page_notes_the_one_on_now(people):
    from datetime import timedelta

    from django.test import Client
    from django.utils import timezone

    from .api_personas import browser

    owner = browser(people.owner)
    now = timezone.now().replace(microsecond=0, tzinfo=None)
    form = {"name": "db-upgrade", "mode": "hold", "starts_at": f"{now - timedelta(hours=1):%Y-%m-%d %H:%M:%S}",
            "ends_at": f"{now + timedelta(hours=1):%Y-%m-%d %H:%M:%S}", "jobs": f"{people.job.pk}", "tags": ""}

    refused = owner.post("/windows/new/", {**form, "ends_at": form["starts_at"]})
    made = owner.post("/windows/new/", form)

    assert refused.status_code == 200 and "The end must come after the start." in refused.content.decode()
    assert made.status_code == 302, made.content.decode()[:3000]
    listed = owner.get("/windows/").content.decode()
    assert 'id="window-db-upgrade"' in listed and "on now" in listed
    job_page = owner.get(f"/jobs/{people.job.pk}/").content.decode()
    assert "db-upgrade</a> (hold): on now" in job_page
    outsider = browser(people.outsider)
    assert "db-upgrade" not in outsider.get("/windows/").content.decode()
    assert outsider.get("/windows/db-upgrade/edit/").status_code == 404
    assert outsider.post("/windows/db-upgrade/delete/").status_code == 404
    theirs = outsider.post("/windows/new/", {**form, "name": "mine"})
    assert f"No job with the id {people.job.pk}." in theirs.content.decode()
    assert Client().get("/windows/").status_code == 302  # to the login page
    assert owner.post("/windows/db-upgrade/delete/").status_code == 302
    assert not Window.objects.exists()


def test_a_windows_tags_reach_only_the_jobs_its_maker_may_see(people):
    from django.utils import timezone

    from jobs.models.window import window_book

    now = timezone.now()
    on_now = {"starts_at": "2020-01-01T00:00:00Z", "ends_at": "2100-01-01T00:00:00Z", "tags": ["reports"]}
    for user, name in ((people.outsider, "theirs"), (people.teammate, "teams"), (people.staff, "staffs")):
        made = people.client(user).post("/api/windows/", {"name": name, **on_now}, format="json")
        assert made.status_code == 201, made.json()
    window_book.refresh(force=True)

    reaching = [w.name for w in window_book.by_mode["hold"].get(people.job.pk, [])]
    assert sorted(reaching) == ["staffs", "teams"]
    assert window_book.covering("hold", people.job.pk, now).name in ("staffs", "teams")


def test_the_admin_saves_a_window_through_the_audited_action(people):
    from .api_personas import browser

    staff = browser(people.staff)
    people.staff.is_superuser = True
    people.staff.save()

    added = staff.post("/admin/jobs/window/add/", {
        "name": "freeze", "description": "", "mode": "mute", "starts_at_0": "", "starts_at_1": "", "ends_at_0": "",
        "ends_at_1": "", "cron": "0 0 24 12 *", "duration_seconds": "86400", "timezone": "Europe/Berlin",
        "jobs": "[]", "tags": '["reports"]', "group": "", "shared": "on"})

    assert added.status_code == 302, added.content.decode()[:2000]
    window = Window.objects.get(name="freeze")
    assert (window.cron, window.shared, window.tags) == ("0 0 24 12 *", True, ["reports"])
    assert AuditEntry.objects.get(subject=Subject.WINDOW).source == "admin"
