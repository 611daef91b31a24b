"""Business calendars: a job's slots skip its calendars' dates, run on business days only, or on the
Nth (or last) business day of the month, judged on the slot's date in the job's timezone; dispatch,
catch-up, backfill, the slot report and "why" agree.

Every expected slot comes from the test's own walk over the days (``open_days``: weekdays, less the
dates the test typed into the calendar, then the Nth of each month), never from the service. The
scheduler's tick is ``dispatch.dispatch_due`` at the test's moment, as in tests/test_dst_nights.py.
"""

import calendar as month_calendar
import random
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core.exceptions import ValidationError

from jobs.actions import calendars as calendar_actions
from jobs.actions.jobs import Actor
from jobs.definitions.jobs import save_job
from jobs.models import CatchupPolicy, Job, JobRun, RunStatus, RunTrigger
from jobs.models.calendar import Calendar, day_rules_cache
from jobs.operations import slot_report
from jobs.scheduling import dispatch
from jobs.timing import calendars as day_math

from .api_personas import make_personas

BERLIN = ZoneInfo("Europe/Berlin")
# The test's own closures: what it types into the calendar, and all it expects the job to skip.
CLOSED = {date(2026, 12, 24): "Christmas Eve", date(2026, 12, 25): "Christmas Day",
          date(2026, 12, 26): "Second Day of Christmas", date(2026, 12, 31): "New Year's Eve",
          date(2027, 1, 1): "New Year's Day"}
NINE_IN_BERLIN = {"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Berlin"}
WINTER = (datetime(2026, 12, 14, tzinfo=UTC), datetime(2027, 2, 6, tzinfo=UTC))  # over Christmas and two month ends


def open_days(first, last, closed, business_days=True, nth=None):
    """The test's oracle: the dates in [first, last] a job with these rules runs on, walked day by day
    (for the Nth business day, over the whole months around the range)."""
    if nth is not None:
        whole = open_days(first.replace(day=1), last.replace(day=month_calendar.monthrange(last.year, last.month)[1]),
                          closed, business_days)
        chosen = []
        for year, month in sorted({(day.year, day.month) for day in whole}):
            in_month = [day for day in whole if (day.year, day.month) == (year, month)]
            index = nth - 1 if nth > 0 else nth
            if -len(in_month) <= index < len(in_month) and first <= in_month[index] <= last:
                chosen.append(in_month[index])
        return chosen
    days, day = [], first
    while day <= last:
        if day not in closed and (not business_days or day.weekday() < 5):
            days.append(day)
        day += timedelta(days=1)
    return days


def nine_oclock(days):
    return [datetime.combine(day, time(9), tzinfo=BERLIN).astimezone(UTC) for day in days]


def expected_slots(start, end, closed=CLOSED, business_days=True, nth=None):
    """09:00 in Berlin on each date the walk finds open, for the slots in [start, end)."""
    first, last = start.astimezone(BERLIN).date(), end.astimezone(BERLIN).date()
    return [slot for slot in nine_oclock(open_days(first, last, closed, business_days, nth)) if start <= slot < end]


def make_calendar(name="de-be", closed=CLOSED):
    return calendar_actions.create(Actor.command_line(), Calendar(
        name=name, dates=[{"date": day.isoformat(), "label": label} for day, label in closed.items()], shared=True))


def make_job(name, saved_at, schedule=NINE_IN_BERLIN, **fields):
    with time_machine.travel(saved_at, tick=False):
        return save_job(Job(name=name, kind="callable", target="builtin.noop", **fields), schedule)


def tick(now, capture):
    with time_machine.travel(now, tick=False), capture(execute=True):
        return dispatch.dispatch_due(now=now)


def runs_per_slot(job):
    return Counter(JobRun.objects.filter(job=job).values_list("scheduled_for", flat=True))


# --- the date math against the test's walk


@pytest.mark.django_db
@pytest.mark.parametrize(("business_days", "nth"), [(False, None), (True, None), (True, 1), (True, 3), (True, -1),
                                                    (True, -2), (True, 22)])
def test_the_slots_are_those_of_the_days_the_walk_finds_open(business_days, nth):
    make_calendar()
    job = make_job("nine", WINTER[0], calendars=["de-be"], business_days=business_days, business_day_of_month=nth)

    slots = job.slots_between(*WINTER, 1000)

    assert slots == expected_slots(*WINTER, business_days=business_days, nth=nth)
    assert job.upcoming_slots(len(slots), after=WINTER[0] - timedelta(microseconds=1))[:len(slots)] == slots


def test_random_rules_agree_with_the_walk_over_two_years():
    rng = random.Random(37)
    start = date(2026, 1, 1)
    for _ in range(40):
        closed = {start + timedelta(days=rng.randrange(730)): "closed" for _ in range(rng.randrange(0, 120))}
        business_days = rng.random() < 0.7
        nth = rng.choice([None, 1, 2, 5, 10, -1, -3]) if business_days else None
        rules = day_math.DayRules(lambda day, closed=closed: [("c", closed[day])] if day in closed else [],
                                  business_days, nth)
        zone = ZoneInfo(rng.choice(["Europe/Berlin", "America/New_York", "Pacific/Auckland", "UTC"]))

        def every_day_at_nine(after, zone=zone):
            day = after.astimezone(zone).date()
            for offset in range(3):
                slot = datetime.combine(day + timedelta(days=offset), time(9), tzinfo=zone).astimezone(UTC)
                if slot > after:
                    return slot
            raise AssertionError("no slot")

        found, cursor = [], datetime.combine(start, time.min, tzinfo=zone).astimezone(UTC)
        while (cursor := day_math.first_open_slot(every_day_at_nine, zone, rules, cursor)) is not None:
            if cursor.astimezone(zone).date() > date(2027, 12, 31):
                break
            found.append(cursor.astimezone(zone).date())
        assert found == open_days(start, date(2027, 12, 31), closed, business_days, nth), (business_days, nth)


def test_a_date_is_the_slots_local_date_not_its_utc_date():
    # 00:30 in Berlin on the 25th is 23:30 UTC on the 24th; a calendar closing the 25th closes it.
    rules = day_math.DayRules(lambda day: [("x", "Christmas Day")] if day == date(2026, 12, 25) else [])

    def half_past_midnight(after):
        day = after.astimezone(BERLIN).date()
        return next(slot for offset in range(3) if (slot := datetime.combine(
            day + timedelta(days=offset), time(0, 30), tzinfo=BERLIN).astimezone(UTC)) > after)

    first = day_math.first_open_slot(half_past_midnight, BERLIN, rules, datetime(2026, 12, 24, 12, tzinfo=UTC))
    assert first == datetime(2026, 12, 25, 23, 30, tzinfo=UTC)  # 00:30 on the 26th in Berlin


@pytest.mark.django_db
def test_a_job_whose_calendar_closes_every_date_has_no_next_slot():
    every_day = {date(2026, 1, 1) + timedelta(days=n): "closed" for n in range(3000)}
    make_calendar("always-closed", every_day)
    job = make_job("never", datetime(2026, 1, 2, tzinfo=UTC), calendars=["always-closed"])
    assert job.next_run_at is None
    assert job.slot_after(datetime(2026, 1, 2, tzinfo=UTC)) is None
    # A 23rd business day of February never comes: looked for over five years, then none.
    february = make_job("feb", datetime(2026, 1, 2, tzinfo=UTC), business_days=True, business_day_of_month=23,
                        schedule={"type": "cron", "cron": "0 9 * 2 *", "timezone": "UTC"})
    assert february.next_run_at is None


@pytest.mark.django_db
def test_an_interval_job_skips_whole_closed_dates_in_utc():
    make_calendar("utc-closed", {date(2026, 12, 25): "Christmas Day"})
    saved = datetime(2026, 12, 24, 22, 0, tzinfo=UTC)
    job = make_job("hourly", saved, schedule={"type": "interval", "every_seconds": 3600}, calendars=["utc-closed"])
    slots = job.slots_between(saved, saved + timedelta(days=2), 100)
    every_hour = [saved + timedelta(hours=n) for n in range(48)]  # the grid of the job's next slot, 23:00
    assert slots == [slot for slot in every_hour if slot.date() != date(2026, 12, 25)]
    assert job.slot_after(datetime(2026, 12, 24, 23, 30, tzinfo=UTC)) == datetime(2026, 12, 26, 0, 0, tzinfo=UTC)


# --- validation


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "key", "words"), [
    ({"calendars": ["nope"]}, "calendars", "No calendar is named 'nope'"),
    ({"calendars": "de-be"}, "calendars", "Must be a list of calendar names."),
    ({"calendars": ["de-be", "de-be"]}, "calendars", "Names a calendar twice."),
    ({"business_day_of_month": 3}, "business_day_of_month", "Needs business_days: true"),
    ({"business_days": True, "business_day_of_month": 0}, "business_day_of_month", "not 0"),
    ({"business_days": True, "business_day_of_month": 24}, "business_day_of_month", "From 1 to 23"),
    ({"business_days": True, "business_day_of_month": -24}, "business_day_of_month", "From 1 to 23"),
])
def test_bad_day_rules_are_refused_naming_the_field(fields, key, words):
    make_calendar()
    with pytest.raises(ValidationError) as refused:
        make_job("bad", WINTER[0], **fields)
    assert any(words in message for message in refused.value.message_dict[key]), refused.value.message_dict


@pytest.mark.django_db
def test_a_one_time_job_takes_no_calendar():
    make_calendar()
    with pytest.raises(ValidationError) as refused:
        make_job("once", WINTER[0], schedule={"type": "once", "run_at": "2026-12-25T09:00:00+01:00"},
                 calendars=["de-be"])
    assert "cron and interval schedules" in str(refused.value.message_dict["calendars"])


# --- through the scheduler, on the test's clock


@pytest.mark.django_db
@pytest.mark.parametrize("nth", [None, 3, -1])
def test_the_scheduler_ticking_over_christmas_and_month_ends_runs_the_open_slots_only(
        nth, redis_client, django_capture_on_commit_callbacks):
    make_calendar()
    start, end = datetime(2026, 12, 20, tzinfo=UTC), datetime(2027, 2, 3, tzinfo=UTC)
    job = make_job("ticked", start, calendars=["de-be"], business_days=True, business_day_of_month=nth)
    now = start + timedelta(seconds=3)
    while now < end:
        tick(now, django_capture_on_commit_callbacks)
        now += timedelta(hours=1)

    expected = expected_slots(start, end, nth=nth)
    assert runs_per_slot(job) == Counter(expected)
    assert set(job.runs.values_list("trigger", "status")) == {(RunTrigger.SCHEDULE, RunStatus.QUEUED)}
    if nth == -1:  # the 31st is closed: the last business day of December is the 30th
        assert [slot.astimezone(BERLIN).date() for slot in expected] == [date(2026, 12, 30), date(2027, 1, 29)]
    if nth == 3:  # January: the 1st closed, the 2nd and 3rd a weekend: the 4th, 5th, 6th
        assert [slot.astimezone(BERLIN).date() for slot in expected] == [date(2027, 1, 6)]
    job.refresh_from_db()
    assert job.next_run_at == nine_oclock(open_days(end.date(), date(2027, 6, 30), CLOSED, True, nth))[0]


@pytest.mark.django_db
def test_a_downtime_over_christmas_catches_up_the_open_slots_only(redis_client, django_capture_on_commit_callbacks):
    make_calendar()
    start = datetime(2026, 12, 22, tzinfo=UTC)
    caught_up = make_job("all", start, calendars=["de-be"], business_days=True, catchup_policy=CatchupPolicy.ALL,
                         catchup_max=10)
    tick(start + timedelta(seconds=3), django_capture_on_commit_callbacks)
    back = datetime(2026, 12, 30, 12, tzinfo=UTC)  # the scheduler is down until the 30th at noon
    tick(back, django_capture_on_commit_callbacks)

    expected = nine_oclock(open_days(date(2026, 12, 22), date(2026, 12, 30), CLOSED))
    assert [slot.astimezone(BERLIN).date() for slot in expected] == [
        date(2026, 12, 22), date(2026, 12, 23), date(2026, 12, 28), date(2026, 12, 29), date(2026, 12, 30)]
    assert runs_per_slot(caught_up) == Counter(expected)


@pytest.mark.django_db
def test_backfill_the_slot_report_and_why_agree_on_christmas(redis_client):
    people = make_personas()
    make_calendar()
    job = make_job("reported", datetime(2026, 12, 1, tzinfo=UTC), calendars=["de-be"], business_days=True,
                   owner=people.owner, group=people.team)
    client = people.client(people.owner)
    body = {"start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}

    with time_machine.travel(datetime(2027, 1, 10, tzinfo=UTC), tick=False):
        response = client.post(f"/api/jobs/{job.pk}/backfill/", body, format="json")
        report = client.get(f"/api/jobs/{job.pk}/slots/", body).json()
        christmas = client.get(f"/api/jobs/{job.pk}/why/", {"at": "2026-12-25T08:00:00Z"}).json()
        saturday = client.get(f"/api/jobs/{job.pk}/why/", {"at": "2027-01-02T08:00:00Z"}).json()

    first, last = date(2026, 12, 20), date(2027, 1, 3)
    expected = nine_oclock(open_days(first, last, CLOSED))
    assert response.status_code == 202, response.json()
    assert runs_per_slot(job) == Counter(expected)
    assert set(job.runs.values_list("trigger", flat=True)) == {RunTrigger.BACKFILL}
    every_day = nine_oclock([first + timedelta(days=n) for n in range((last - first).days + 1)])
    assert [slot["scheduled_for"] for slot in report["slots"]] == [at.isoformat().replace("+00:00", "Z") for at in every_day]
    reasons = {datetime.fromisoformat(slot["scheduled_for"]).astimezone(BERLIN).date(): (slot["outcome"], slot["reason"])
               for slot in report["slots"]}
    assert reasons[date(2026, 12, 25)] == ("skipped", "holiday — Christmas Day (calendar de-be)")
    assert reasons[date(2026, 12, 27)] == ("skipped", "not a business day — Sunday")
    assert reasons[date(2026, 12, 28)] == ("ran", "")
    assert report["counts"]["ran"] == len(expected)
    assert report["counts"]["skipped"] == len(every_day) - len(expected)
    assert christmas["explanation"] == ("Skipped: the slot at 2026-12-25 08:00:00 UTC was not run: "
                                        "holiday — Christmas Day (calendar de-be).")
    assert saturday["explanation"].endswith("not a business day — Saturday.")


@pytest.mark.django_db
def test_the_nth_business_day_is_said_in_the_report():
    make_calendar()
    job = make_job("third", datetime(2026, 12, 1, tzinfo=UTC), calendars=["de-be"], business_days=True,
                   business_day_of_month=3)
    report = slot_report.build(job, datetime(2027, 1, 4, tzinfo=UTC), datetime(2027, 1, 7, tzinfo=UTC),
                               now=datetime(2027, 1, 3, tzinfo=UTC))
    assert [(slot.at.astimezone(BERLIN).day, slot.outcome, slot.reason) for slot in report.slots] == [
        (4, "skipped", "not the 3rd business day of January 2027 (that is Wednesday 2027-01-06)"),
        (5, "skipped", "not the 3rd business day of January 2027 (that is Wednesday 2027-01-06)"),
        (6, "upcoming", ""),
    ]


# --- a change of a calendar


@pytest.mark.django_db
def test_a_calendar_change_moves_the_next_slot_of_the_jobs_that_use_it():
    calendar = make_calendar("office", {})
    saved = datetime(2026, 12, 23, 12, tzinfo=UTC)
    job = make_job("office-job", saved, calendars=["office"])
    other = make_job("other-job", saved)
    assert job.next_run_at == nine_oclock([date(2026, 12, 24)])[0]

    with time_machine.travel(saved, tick=False):
        calendar_actions.edit(Actor.command_line(), calendar, {"dates": ["2026-12-24", "2026-12-25"]})
    job.refresh_from_db()
    other.refresh_from_db()
    assert job.next_run_at == nine_oclock([date(2026, 12, 26)])[0]
    assert other.next_run_at == nine_oclock([date(2026, 12, 24)])[0]

    with time_machine.travel(saved, tick=False):
        calendar_actions.edit(Actor.command_line(), calendar, {"dates": []})
    job.refresh_from_db()
    assert job.next_run_at == nine_oclock([date(2026, 12, 24)])[0]


@pytest.mark.django_db
def test_a_process_sees_a_calendar_changed_elsewhere_at_its_next_check():
    calendar = make_calendar("elsewhere", {})
    job = make_job("watcher", datetime(2026, 12, 23, 12, tzinfo=UTC), calendars=["elsewhere"])
    after = datetime(2026, 12, 23, 12, tzinfo=UTC)
    assert job.slot_after(after) == nine_oclock([date(2026, 12, 24)])[0]
    # Another process's change: a plain UPDATE of the row, with its revision, as a save there makes.
    Calendar.objects.filter(pk=calendar.pk).update(dates=[{"date": "2026-12-24", "label": ""}], revision=99)
    day_rules_cache.refresh(force=True)  # what the scheduler does at each tick (and any process each second)
    assert job.slot_after(after) == nine_oclock([date(2026, 12, 25)])[0]


@pytest.mark.django_db
def test_a_job_edit_of_its_day_rules_moves_its_next_slot():
    make_calendar()
    people = make_personas()
    saved = datetime(2026, 12, 23, 12, tzinfo=UTC)
    job = make_job("edited", saved, owner=people.owner, group=people.team)
    assert job.next_run_at == nine_oclock([date(2026, 12, 24)])[0]
    with time_machine.travel(saved, tick=False):
        response = people.client(people.owner).patch(
            f"/api/jobs/{job.pk}/", {"calendars": ["de-be"], "business_days": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["next_run_at"] == "2026-12-28T08:00:00Z"
    assert response.json()["calendars"] == ["de-be"]


@pytest.mark.django_db
def test_the_schedule_preview_and_the_job_page_show_the_open_slots_only():
    from .api_personas import browser

    make_calendar()
    people = make_personas()
    saved = datetime(2026, 12, 20, tzinfo=UTC)
    job = make_job("previewed", saved, calendars=["de-be"], business_days=True, business_day_of_month=-1,
                   owner=people.owner, group=people.team)
    expected = expected_slots(saved, datetime(2027, 12, 31, tzinfo=UTC), nth=-1)[:10]
    shown = [f"{slot.astimezone(BERLIN):%a %Y-%m-%d %H:%M:%S} CET" for slot in expected[:3]]

    with time_machine.travel(saved, tick=False):
        client = browser(people.owner)
        preview = client.get("/jobs/schedule-preview/", {
            **{key: value for key, value in NINE_IN_BERLIN.items() if key != "type"}, "schedule_type": "cron",
            "calendars": "de-be", "business_days": "on", "business_day_of_month": "-1"}).json()
        unknown = client.get("/jobs/schedule-preview/", {"schedule_type": "cron", "cron": "0 9 * * *",
                                                         "timezone": "UTC", "calendars": "nope"}).json()
        page = client.get(f"/jobs/{job.pk}/").content.decode()

    assert preview["slots"][:3] == shown  # 30 December, 29 January, 26 February
    assert [slot.astimezone(BERLIN).date() for slot in expected[:3]] == [
        date(2026, 12, 30), date(2027, 1, 29), date(2027, 2, 26)]
    assert "No calendar is named 'nope'" in unknown["errors"]["calendars"][0]
    assert all(f"<li>{text} " in page for text in shown)
