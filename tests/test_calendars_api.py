"""Calendars through the API: staff make and change them, everybody reads them; filled from an ICS
file or from a country's holidays; every change audited; bad input a 400 naming the field."""

from datetime import UTC, date, datetime

import pytest
import time_machine
from rest_framework.test import APIClient

from audit.models import Action, AuditEntry, Subject
from jobs.definitions.jobs import save_job
from jobs.models import Calendar, Job

from .api_personas import browser

# A real calendar file: an all-day event, one of three days, one recurring every year on 24
# December (RRULE), a weekly one with an exception (EXDATE), and a timed event.
ICS = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Example Corp//Office closures//EN
BEGIN:VEVENT
UID:one@example.com
DTSTAMP:20260101T000000Z
DTSTART;VALUE=DATE:20260615
DTEND;VALUE=DATE:20260616
SUMMARY:Company day
END:VEVENT
BEGIN:VEVENT
UID:three@example.com
DTSTAMP:20260101T000000Z
DTSTART;VALUE=DATE:20260803
DTEND;VALUE=DATE:20260806
SUMMARY:Summer closure
END:VEVENT
BEGIN:VEVENT
UID:yearly@example.com
DTSTAMP:20260101T000000Z
DTSTART;VALUE=DATE:20261224
DTEND;VALUE=DATE:20261225
RRULE:FREQ=YEARLY
SUMMARY:Christmas Eve
END:VEVENT
BEGIN:VEVENT
UID:weekly@example.com
DTSTAMP:20260101T000000Z
DTSTART;VALUE=DATE:20260902
DTEND;VALUE=DATE:20260903
RRULE:FREQ=WEEKLY;COUNT=3
EXDATE;VALUE=DATE:20260909
SUMMARY:Inventory
END:VEVENT
BEGIN:VEVENT
UID:timed@example.com
DTSTAMP:20260101T000000Z
DTSTART;TZID=Europe/Berlin:20261111T140000
DTEND;TZID=Europe/Berlin:20261111T180000
SUMMARY:Afternoon off
END:VEVENT
END:VCALENDAR
""".replace("\n", "\r\n")


def entries():
    return list(AuditEntry.objects.filter(subject=Subject.CALENDAR).order_by("id"))


def test_staff_make_a_shared_calendar_and_everybody_reads_it_by_id_or_name(people):
    staff = people.client(people.staff)
    body = {"name": "office", "description": "Closures", "shared": True, "dates": [
        "2026-12-31", {"date": "2026-12-24", "label": "Christmas Eve"}]}

    made = staff.post("/api/calendars/", body, format="json")

    assert made.status_code == 201, made.json()
    assert made.json()["dates"] == [{"date": "2026-12-24", "label": "Christmas Eve"},
                                    {"date": "2026-12-31", "label": ""}]
    outsider = people.client(people.outsider)
    by_id = outsider.get(f"/api/calendars/{made.json()['id']}/")
    by_name = outsider.get("/api/calendars/office/")
    assert by_id.status_code == by_name.status_code == 200
    assert by_id.json() == by_name.json()
    assert [c["name"] for c in outsider.get("/api/calendars/").json()["results"]] == ["office"]
    [entry] = entries()
    assert (entry.action, entry.job_name, entry.actor, entry.source) == (Action.CREATE, "office", people.staff, "api")
    assert entry.changes["dates"] == [0, 2]


def test_only_staff_change_or_delete_a_shared_calendar_and_nobody_reads_without_logging_in(people):
    calendar = Calendar.objects.create(name="office", dates=[{"date": "2026-12-24", "label": "Christmas Eve"}],
                                       shared=True)
    for user in (people.owner, people.outsider, people.runner):
        client = people.client(user)
        assert client.patch("/api/calendars/office/", {"dates": []}, format="json").status_code == 403
        assert client.delete("/api/calendars/office/").status_code == 403
        assert client.post("/api/calendars/office/import/", ICS, content_type="text/calendar").status_code == 403
    assert APIClient().get("/api/calendars/").status_code in (401, 403)
    calendar.refresh_from_db()
    assert calendar.dates == [{"date": "2026-12-24", "label": "Christmas Eve"}]
    assert entries() == []
    mine = people.client(people.owner).post("/api/calendars/", {"name": "mine"}, format="json")
    assert mine.status_code == 201 and mine.json()["owner"] == "owner"


def test_a_change_is_audited_with_the_dates_added_and_removed(people):
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office", "dates": ["2026-12-24"]}, format="json")

    changed = staff.patch("/api/calendars/office/", {"dates": ["2026-12-31"], "description": "new"}, format="json")

    assert changed.status_code == 200, changed.json()
    entry = entries()[-1]
    assert entry.action == Action.CHANGE
    assert entry.changes == {"description": ["", "new"], "dates": [1, 1]}
    assert entry.detail == "added 2026-12-31; removed 2026-12-24"


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"name": "de-be; DROP TABLE jobs_job"}, "name", "Letters, digits"),
    ({"name": "<script>alert(1)</script>"}, "name", "Letters, digits"),
    ({"name": "2026"}, "name", "not only digits"),
    ({"name": "x" * 101}, "name", "100"),
    ({"name": "ok", "dates": ["2026-13-01"]}, "dates", "Item 1: '2026-13-01' is not a date"),
    ({"name": "ok", "dates": "2026-12-24"}, "dates", "Must be a list of dates"),
    ({"name": "ok", "dates": [{"date": "2026-12-24", "label": "x" * 201}]}, "dates", "at most 200 characters"),
    ({"name": "ok", "dates": [{"date": "2026-12-24", "colour": "red"}]}, "dates", "optional 'label'"),
    ({"name": "ok", "dates": ["2026-01-01"] * 10001}, "dates", "At most 10000 dates"),
    ({"name": "ok", "country": "ZZ"}, "country", "not a country the holidays package knows"),
    ({"name": "ok", "country": "DE", "subdivision": "XX"}, "subdivision", "DE has no subdivision 'XX'"),
    ({"name": "ok", "subdivision": "BE"}, "subdivision", "needs a country"),
    ({"name": "ok\x00"}, "name", ""),
])
def test_bad_input_is_a_400_naming_the_field(people, body, field, words):
    response = people.client(people.staff).post("/api/calendars/", body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()[field]), response.json()
    assert not Calendar.objects.exists()


def test_a_label_is_kept_as_text_and_shown_escaped_on_the_pages(people):
    label = '<img src=x onerror="alert(1)">'
    made = people.client(people.staff).post("/api/calendars/", {"name": "office", "shared": True, "dates": [
        {"date": "2026-12-24", "label": label}]}, format="json")
    assert made.json()["dates"][0]["label"] == label
    page = browser(people.owner).get("/calendars/office/")
    assert page.status_code == 200
    assert label not in page.content.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page.content.decode()


def test_a_country_fills_the_calendar_with_its_holidays_of_every_year(people):
    with time_machine.travel(datetime(2026, 6, 1, tzinfo=UTC), tick=False):
        made = people.client(people.staff).post("/api/calendars/", {"name": "de-be", "country": "de",
                                                                    "subdivision": "be"}, format="json")
    assert made.status_code == 201, made.json()
    shown = {item["date"]: item["label"] for item in made.json()["holidays"]}
    assert made.json()[("country")] == "DE" and made.json()["subdivision"] == "BE"
    assert shown["2026-12-25"] == "Christmas Day"
    assert shown["2026-03-08"] == "Women's Day"  # Berlin's own holiday
    assert shown["2027-12-25"] == "Christmas Day"  # next year's too
    job = save_job(Job(name="berlin", kind="callable", target="builtin.noop", calendars=["de-be"]),
                   {"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Berlin"})
    days = [slot.date() for slot in job.slots_between(datetime(2030, 12, 23, tzinfo=UTC),
                                                     datetime(2030, 12, 28, tzinfo=UTC), 10)]
    assert days == [date(2030, 12, 23), date(2030, 12, 24), date(2030, 12, 27)]  # years on, without a refresh
    bavaria = Calendar.objects.create(name="de-by", country="DE", subdivision="BY")
    assert "2026-03-08" not in {item["date"] for item in bavaria.holidays_in(2026)}


def test_an_ics_file_adds_its_events_as_dates(people):
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office", "dates": [{"date": "2026-01-02", "label": "Typed"}]},
               format="json")

    with time_machine.travel(datetime(2026, 6, 1, tzinfo=UTC), tick=False):
        response = staff.post("/api/calendars/office/import/", ICS, content_type="text/calendar")

    assert response.status_code == 200, response.json()
    found = {item["date"]: item["label"] for item in response.json()["dates"]}
    assert found["2026-01-02"] == "Typed"
    assert found["2026-06-15"] == "Company day"
    assert [day for day in found if day.startswith("2026-08")] == ["2026-08-03", "2026-08-04", "2026-08-05"]
    # Yearly from 2026 to the window's end (five years on), never before the event's start.
    assert [day for day, label in found.items() if label == "Christmas Eve"] == [
        f"{year}-12-24" for year in range(2026, 2032)]
    assert [day for day, label in found.items() if label == "Inventory"] == ["2026-09-02", "2026-09-16"]
    assert found["2026-11-11"] == "Afternoon off"
    assert len(found) == 1 + 1 + 3 + 6 + 2 + 1
    entry = entries()[-1]
    assert entry.action == Action.CHANGE and entry.changes["dates"] == [1, 14]


def test_an_ics_upload_as_a_file_can_replace_the_dates(people):
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office", "dates": ["2026-01-02"]}, format="json")
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("closures.ics", ICS.encode(), content_type="text/calendar")
    with time_machine.travel(datetime(2026, 6, 1, tzinfo=UTC), tick=False):
        response = staff.post("/api/calendars/office/import/?replace=true", {"file": upload}, format="multipart")
    assert response.status_code == 200, response.json()
    assert "2026-01-02" not in {item["date"] for item in response.json()["dates"]}
    assert len(response.json()["dates"]) == 13


@pytest.mark.parametrize(("text", "words"), [
    ("this is not a calendar", "Not an iCalendar (ICS) file"),
    ("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:2026XX01\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "cannot be read"),
    ("BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260101\r\nEND:VEVENT\r\n", "BEGIN:VCALENDAR"),
    ("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:s\r\nDTSTART:20260101T000000Z\r\nRRULE:FREQ=SECONDLY\r\n"
     "SUMMARY:flood\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", "repeats more often than once a day"),
    ("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:s\r\nDTSTART:20260101T000000Z\r\n"
     "RRULE:FREQ=DAILY;BYHOUR=1,2,3;BYMINUTE=0,1,2,3,4,5\r\nSUMMARY:flood\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
     "repeats more often than once a day"),
])
def test_a_file_that_is_not_a_calendar_is_a_400_and_changes_nothing(people, text, words, settings):
    settings.JOBS_CALENDAR_ICS_MAX_BYTES = 1024 * 1024
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office", "dates": ["2026-01-02"]}, format="json")
    response = staff.post("/api/calendars/office/import/", text, content_type="text/calendar")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["file"]), response.json()
    assert Calendar.objects.get(name="office").dates == [{"date": "2026-01-02", "label": ""}]


def test_the_pages_list_calendars_and_let_staff_edit_and_import(people):
    Calendar.objects.create(name="office", dates=[{"date": "2026-12-24", "label": "Christmas Eve"}], shared=True)
    listed = browser(people.owner).get("/calendars/")
    assert listed.status_code == 200 and 'href="/calendars/office/"' in listed.content.decode()
    assert 'id="new-calendar"' in listed.content.decode()  # a calendar of their own
    refused = browser(people.owner).post("/calendars/office/", {"name": "office", "dates": ""})
    assert refused.status_code == 403
    staff = browser(people.staff)
    bad = staff.post("/calendars/office/", {"name": "office", "dates": "2026-12-24 Christmas Eve\n2026-02-30 No"})
    assert bad.status_code == 200 and "Item 2: &#x27;2026-02-30&#x27; is not a date" in bad.content.decode()
    saved = staff.post("/calendars/office/", {"name": "office", "dates": "2026-12-24 Christmas Eve\n2026-12-31"})
    assert saved.status_code == 302
    assert Calendar.objects.get(name="office").dates == [{"date": "2026-12-24", "label": "Christmas Eve"},
                                                         {"date": "2026-12-31", "label": ""}]
    from django.core.files.uploadedfile import SimpleUploadedFile

    with time_machine.travel(datetime(2026, 6, 1, tzinfo=UTC), tick=False):
        staff.post("/calendars/office/import/", {"file": SimpleUploadedFile("c.ics", ICS.encode())})
    assert len(Calendar.objects.get(name="office").dates) == 2 + 13 - 1  # Christmas Eve 2026 in both
    made = staff.post("/calendars/", {"name": "new-one", "country": "FR", "dates": ""})
    assert made.status_code == 302 and Calendar.objects.get(name="new-one").country == "FR"
    assert [entry.source for entry in entries()] == ["page", "page", "page"]


def test_a_huge_file_is_refused(people, settings):
    settings.JOBS_CALENDAR_ICS_MAX_BYTES = 4096
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office"}, format="json")
    padding = "X-PAD:" + "x" * 70 + "\r\n"
    just_over = ICS.replace("END:VCALENDAR", padding * 60 + "END:VCALENDAR")  # ~ 6 KB: over the cap
    response = staff.post("/api/calendars/office/import/", just_over, content_type="text/calendar")
    assert response.status_code == 400, response.content
    assert "at most 4096 (JOBS_CALENDAR_ICS_MAX_BYTES)" in " ".join(response.json()["file"])
    huge = ICS.replace("END:VCALENDAR", padding * 2000 + "END:VCALENDAR")  # past the body's cap
    assert staff.post("/api/calendars/office/import/", huge, content_type="text/calendar").status_code == 413
    assert Calendar.objects.get(name="office").dates == []


def test_a_calendar_jobs_use_keeps_its_name_and_is_not_deleted(people):
    staff = people.client(people.staff)
    staff.post("/api/calendars/", {"name": "office"}, format="json")
    save_job(Job(name="uses-it", kind="callable", target="builtin.noop", calendars=["office"]),
             {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"})

    renamed = staff.patch("/api/calendars/office/", {"name": "office-2"}, format="json")
    deleted = staff.delete("/api/calendars/office/")

    assert renamed.status_code == 409 and "cannot be renamed" in renamed.json()["detail"]
    assert deleted.status_code == 409 and "uses-it" in deleted.json()["detail"]
    assert Calendar.objects.filter(name="office").exists()
    Job.objects.filter(name="uses-it").delete()
    assert staff.delete("/api/calendars/office/").status_code == 204
    assert entries()[-1].action == Action.DELETE


def test_a_job_naming_an_unknown_calendar_is_a_400(people):
    response = people.client(people.owner).post("/api/jobs/", {
        "name": "n", "kind": "callable", "target": "builtin.noop", "calendars": ["nope", "<b>"],
        "schedule": {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"}}, format="json")
    assert response.status_code == 400
    assert "No calendar is named '<b>', 'nope'" in response.json()["calendars"][0]
    late = people.client(people.owner).post("/api/jobs/", {
        "name": "n", "kind": "callable", "target": "builtin.noop", "business_day_of_month": -1,
        "schedule": {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"}}, format="json")
    assert late.status_code == 400
    assert late.json()["business_day_of_month"] == ["Needs business_days: true (it counts business days)."]


FILE_WITH_CALENDARS = """
calendars:
  - name: office
    description: Closures
    dates:
      - 2026-12-31
      - {date: 2026-12-24, label: Christmas Eve}
  - name: de-be
    country: DE
    subdivision: BE
jobs:
  - name: month-end
    kind: callable
    target: builtin.noop
    schedule: {type: cron, cron: "0 9 * * *", timezone: Europe/Berlin}
    calendars: [de-be, office]
    business_days: true
    business_day_of_month: -1
"""


def test_a_file_defines_calendars_and_the_jobs_that_name_them(people):
    from django.contrib.auth.models import Permission

    staff = people.client(people.staff)
    applied = staff.post("/api/jobs-as-code/", {"text": FILE_WITH_CALENDARS}, format="json")

    assert applied.status_code == 200, applied.json()
    assert applied.json()["plan"][:2] == ["+ create calendar office", "+ create calendar de-be"]
    job = Job.objects.get(name="month-end")
    assert (job.calendars, job.business_days, job.business_day_of_month) == (["de-be", "office"], True, -1)
    assert Calendar.objects.get(name="office").dates == [{"date": "2026-12-24", "label": "Christmas Eve"},
                                                         {"date": "2026-12-31", "label": ""}]
    again = staff.post("/api/jobs-as-code/", {"text": FILE_WITH_CALENDARS}, format="json").json()
    assert again["applied"] is False and "= unchanged calendars: 2" in again["plan"]
    exported = staff.get("/api/jobs-as-code/").json()["text"]
    assert exported.index("calendars:") < exported.index("jobs:")
    assert "- name: de-be" in exported and "business_day_of_month: -1" in exported

    # A user who may apply jobs reads shared calendars and may name them, but not change them.
    Calendar.objects.update(shared=True)
    people.owner.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    owner = people.client(people.owner)
    changed = FILE_WITH_CALENDARS.replace("- 2026-12-31", "- 2027-12-31").replace("month-end", "owners-job")
    refused = owner.post("/api/jobs-as-code/", {"text": changed}, format="json")
    assert refused.status_code == 400
    assert any("Only staff may change or delete a shared calendar" in error["message"]
               for error in refused.json()["errors"]), refused.json()
    assert Calendar.objects.get(name="office").dates[-1]["date"] == "2026-12-31"
    kept = owner.post("/api/jobs-as-code/", {"text": FILE_WITH_CALENDARS.replace("month-end", "owners-job")},
                      format="json")
    assert kept.status_code == 200, kept.json()
    assert Job.objects.get(name="owners-job").owner == people.owner


def test_the_admin_edits_dates_as_lines_through_the_audited_action(people):
    Calendar.objects.create(name="office", dates=[{"date": "2026-12-24", "label": "Christmas Eve"}])
    calendar = Calendar.objects.get(name="office")
    admin = browser(people.staff)
    people.staff.is_superuser = True
    people.staff.save()
    form = admin.get(f"/admin/jobs/calendar/{calendar.pk}/change/")
    assert form.status_code == 200 and "2026-12-24 Christmas Eve" in form.content.decode()
    saved = admin.post(f"/admin/jobs/calendar/{calendar.pk}/change/", {
        "name": "office", "description": "", "country": "", "subdivision": "",
        "dates": "2026-12-24 Christmas Eve\r\n2026-12-31 New Year's Eve"})
    assert saved.status_code == 302
    assert Calendar.objects.get(name="office").dates[-1] == {"date": "2026-12-31", "label": "New Year's Eve"}
    [entry] = entries()
    assert (entry.source, entry.detail) == ("admin", "added 2026-12-31")
    bad = admin.post(f"/admin/jobs/calendar/{calendar.pk}/change/", {"name": "office", "dates": "31.12.2026"})
    assert bad.status_code == 200 and "is not a date as YYYY-MM-DD" in bad.content.decode()
    assert browser(people.owner).get(f"/admin/jobs/calendar/{calendar.pk}/change/").status_code == 302  # no admin


def test_nul_characters_are_refused_not_a_server_error(people):
    owner = people.client(people.owner)
    job = owner.post("/api/jobs/", {"name": "n", "kind": "callable", "target": "builtin.noop", "calendars": ["a\x00b"],
                                    "schedule": {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"}}, format="json")
    assert job.status_code == 400 and "NUL" in job.json()["calendars"][0]
    assert owner.get("/api/calendars/a%00b/").status_code == 404
    assert browser(people.owner).get("/calendars/a%00b/").status_code == 404
    preview = browser(people.owner).get("/jobs/schedule-preview/", {"schedule_type": "cron", "cron": "0 9 * * *",
                                                                    "timezone": "UTC", "calendars": "a\x00b"})
    assert preview.status_code == 200 and "NUL" in preview.json()["errors"]["calendars"][0]
