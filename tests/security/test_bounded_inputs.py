"""Every input a user controls has a bound that answers in words, never a 500 or minutes of a web
worker: the on-time report of a tag, a calendar file's events, an H expression's numbers, the size
of a request body (a calendar upload read only for staff), and the outbound guard's ranges."""

from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from jobs.definitions.jobs import save_job, save_jobs
from jobs.models import Calendar, Job
from jobs.operations import reports

NOW = datetime(2026, 11, 10, 12, 30, tzinfo=UTC)  # the 90 days before hold the clocks' change of 25 October


def fleet(count, zone, tag="fleet", spread=0):
    save_jobs([(Job(name=f"{tag}-{n}", kind="callable", target="builtin.noop", tags=[tag], spread=spread),
                {"type": "cron", "cron": "* * * * *", "timezone": zone}) for n in range(count)])
    Job.objects.filter(name__startswith=f"{tag}-").update(created_at=NOW - timedelta(days=100))


def test_a_tag_report_past_its_budget_is_a_400_naming_the_setting(people, settings):
    settings.JOBS_REPORT_MAX_SLOTS = 5000
    fleet(5, "Europe/Berlin")  # 5 × 1,500 slots on the 25-hour day of 25 October, walked one by one
    staff = people.api(people.staff)
    with time_machine.travel(NOW, tick=False):
        response = staff.get("/api/reports/?tag=fleet&days=90")
        assert response.status_code == 400
        assert response.json() == {"days": [
            "narrow the report: over 90 days its jobs' schedules have more than 5000 slots on days with a clock "
            "change, walked one by one (JOBS_REPORT_MAX_SLOTS): ask for fewer days or fewer jobs."]}
        page = Client()
        page.force_login(people.staff)
        shown = page.get("/reports/?tag=fleet&days=90")
        assert shown.status_code == 400 and "JOBS_REPORT_MAX_SLOTS" in shown.content.decode()
        # The 7 days after the change walk nothing: every day and part of a day is counted.
        # The slots up to now (13:30 in Berlin), those in the scheduler's grace among them (as due).
        assert staff.get("/api/reports/?tag=fleet&days=7").json()["slots_expected"] == 5 * (6 * 1440 + 13 * 60 + 30)

    # A thousand every-minute jobs in UTC walk nothing: their slots come from the cron fields alone,
    # today's part of a day too (89 whole days and the 12 h 30 min up to now).
    fleet(1000, "UTC", tag="utc")
    with time_machine.travel(NOW, tick=False):
        report = staff.get("/api/reports/?tag=utc&days=90").json()
    assert report["slots_expected"] == 1000 * (89 * 1440 + 12 * 60 + 30)


@pytest.mark.parametrize("zone,spread", [("UTC", 0), ("Europe/Berlin", 3600), ("America/New_York", 59)])
def test_a_part_of_a_day_counts_as_many_slots_as_walking_it_finds(db, zone, spread):
    job = save_job(Job(name="parts", kind="callable", target="builtin.noop", spread=spread),
                   {"type": "cron", "cron": "*/7 3-20 * * 1-5", "timezone": zone})
    lo = datetime(2026, 11, 10, 0, 0, tzinfo=UTC)
    for hours, minutes in ((0, 1), (3, 30), (11, 59), (23, 59)):
        hi = lo + timedelta(hours=hours, minutes=minutes, seconds=30)
        assert reports._cron_slots_between(job, job.day_zone, lo + timedelta(minutes=7), hi) == len(
            job.slots_between(lo + timedelta(minutes=7), hi, 100000))


# Two thousand years: 734,000 days each (recurring_ical_events itself refuses an event longer than
# the years from 1 to the window's start: "date value out of range").
EVENT = ("BEGIN:VEVENT\r\nUID:{n}@example.com\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:00300101\r\n"
         "DTEND;VALUE=DATE:20400101\r\nSUMMARY:Forever {n}\r\nEND:VEVENT\r\n")


def ics(events):
    return "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//EN\r\n" + "".join(
        EVENT.format(n=n) for n in range(events)) + "END:VCALENDAR\r\n"


def test_an_event_of_two_thousand_years_is_the_windows_days_and_many_are_refused(people):
    staff = people.api(people.staff)
    assert staff.post("/api/calendars/", {"name": "forever", "dates": []}, format="json").status_code == 201
    with time_machine.travel(NOW, tick=False):
        refused = staff.post("/api/calendars/forever/import/", ics(40), content_type="text/calendar")
        assert refused.status_code == 400
        assert refused.json() == {"file": [
            "The file's events cover more than 100000 days from 2025-01-01 to 2031-12-31 (several-day events "
            "counted for each of their days)."]}
        assert Calendar.objects.get(name="forever").dates == []
        taken = staff.post("/api/calendars/forever/import/", ics(1), content_type="text/calendar")
    assert taken.status_code == 200, taken.json()
    dates = [entry["date"] for entry in Calendar.objects.get(name="forever").dates]
    assert (dates[0], dates[-1], len(dates)) == ("2025-01-01", "2031-12-31", (date(2032, 1, 1) - date(2025, 1, 1)).days)


@pytest.mark.parametrize("cron,field", [
    ("H(0-" + "9" * 5000 + ") * * * *", "minute"),
    ("0 H(0-23)/" + "1" * 5000 + " * * *", "hour"),
    ("0 0 H(" + "0" * 4400 + "1-28) * *", "day of month"),
])
def test_an_h_with_a_number_of_thousands_of_digits_is_a_400(people, cron, field):
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "huge", "kind": "callable", "target": "builtin.noop", "schedule": {"type": "cron", "cron": cron}},
        format="json")
    assert response.status_code == 400
    [message] = response.json()["schedule"]["cron"]
    assert message.endswith(f"…' in the {field} field: H is written H, H(a-b), H/n or H(a-b)/n, each number of "
                            "at most 4 digits.")
    assert len(message) < 200
    assert not Job.objects.filter(name="huge").exists()


def test_huge_numbers_anywhere_in_a_schedule_are_a_400(people):
    for schedule in ({"type": "cron", "cron": "H/" + "9" * 5000 + " * * * *"},
                     {"type": "cron", "cron": "0-" + "9" * 5000 + " * * * *"},
                     {"type": "cron", "cron": "*/" + "9" * 5000 + " * * * *"},
                     {"type": "interval", "every_seconds": 10 ** 30}):
        response = people.api(people.owner).post("/api/jobs/", {
            "name": "huge", "kind": "callable", "target": "builtin.noop", "schedule": schedule}, format="json")
        assert response.status_code == 400 and "schedule" in response.json(), schedule
        assert len(response.content) < 400


def test_a_request_body_past_the_cap_is_a_413_before_it_is_read(people, settings):
    settings.REQUEST_BODY_MAX_BYTES = 64 * 1024
    browser = Client()
    browser.force_login(people.owner)
    body = b"x" * (65 * 1024)
    response = browser.generic("POST", "/jobs/new/", body, content_type="multipart/form-data; boundary=b")
    assert response.status_code == 413
    assert response.content.decode() == (f"The request body is {len(body)} bytes; at most 65536 "
                                          "(REQUEST_BODY_MAX_BYTES).\n")
    assert Client().post("/accounts/login/", {"username": "x" * 70000}).status_code == 413


def test_a_calendar_upload_is_refused_to_a_user_who_is_not_staff_before_it_is_read(people, settings):
    Calendar.objects.create(name="office", dates=[], shared=True)  # staff's, shared: others may not change it
    browser = Client()
    browser.force_login(people.owner)
    # A form that cannot be parsed: reading it would be a 400; the staff check answers first.
    broken = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.ics\"\r\n\r\nBEGIN"
    response = browser.generic("POST", "/calendars/office/import/", broken,
                               content_type="multipart/form-data; boundary=b")
    assert response.status_code == 403
    assert "Only staff may change or delete a shared calendar" in response.content.decode()

    staff = Client(enforce_csrf_checks=True)
    staff.force_login(people.staff)
    too_big = b"x" * (settings.JOBS_CALENDAR_ICS_MAX_BYTES + 65 * 1024)
    response = staff.generic("POST", "/calendars/office/import/", too_big, content_type="multipart/form-data; boundary=b")
    assert response.status_code == 413
    assert "an ICS file is at most 262144 (JOBS_CALENDAR_ICS_MAX_BYTES)" in response.content.decode()
    # Staff's upload is still checked against CSRF: without the form's token, 403.
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = staff.post("/calendars/office/import/", {"file": SimpleUploadedFile("c.ics", ics(1).encode())})
    assert response.status_code == 403 and "CSRF" in response.content.decode()


def refused_target(people, host, path):
    """The answer to an HTTP job aimed at ``host``: a 400 naming ``target``, its message returned."""
    response = people.api(people.owner).post("/api/jobs/", {
        "name": "refused", "kind": "http", "target": f"http://{host}{path}"}, format="json")
    assert response.status_code == 400
    return response.json()["target"]


@pytest.mark.parametrize("host", ["[fec0::1]", "[fec0:0:0:ffff::1]", "[feff:ffff::1]"])
def test_a_site_local_ipv6_address_is_refused(people, host):
    assert refused_target(people, host, "/metadata") == [
        f"{host.strip('[]')} is a site-local address; outbound requests may not reach it."]


@pytest.mark.parametrize("host", ["[3fff::1]", "192.0.0.8", "192.88.99.1"])
def test_other_ranges_iana_marks_not_global_are_refused(people, host):
    assert refused_target(people, host, "/") == [
        f"{host.strip('[]')} is not a public address; outbound requests may not reach it."]
