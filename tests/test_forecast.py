"""The load forecast against the test's own count: every job's slots walked one by one (cron through
the DST oracle of tests/dst_oracle.py, intervals and one-time jobs by arithmetic), over a day that
holds Europe/Berlin's spring-forward night; the peaks and the worker slots they need; what a user
who is not staff sees; and spreading a peak, staff only, audited."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client

from audit.models import Action
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobAttempt, JobHourCounts, JobRun
from jobs.operations import forecast as forecasts
from jobs.timing import spread

from . import dst_oracle
from .api_personas import browser, make_personas
from .work_trail import work_entries

# Noon UTC the day before clocks in Europe/Berlin jump from 02:00 to 03:00 (01:00 UTC on 29 March).
NOW = datetime(2026, 3, 28, 12, 0, 20, tzinfo=UTC)
START = NOW.replace(second=0)

CRONS = [  # (name, expression, zone, spread)
    ("quarter-utc", "*/15 * * * *", "UTC", 0),
    ("quarter-utc-2", "*/15 * * * *", "UTC", 0),
    ("quarter-spread", "*/15 * * * *", "UTC", 900),
    ("berlin-night", "*/30 1-3 * * *", "Europe/Berlin", 0),  # 02:00 and 02:30 do not exist that night
    ("berlin-night-spread", "*/30 1-3 * * *", "Europe/Berlin", 3600),
    ("berlin-0230", "30 2 * * *", "Europe/Berlin", 0),
    ("new-york-hourly", "0 * * * *", "America/New_York", 0),
    ("hashed", "H/10 * * * *", "UTC", 0),
    ("hashed-spread", "H H(0-5) * * *", "Asia/Kolkata", 120),
    ("top-of-hour-a", "0 * * * *", "UTC", 0),
    ("top-of-hour-b", "0 * * * *", "UTC", 0),
    ("top-of-hour-c", "0 * * * *", "UTC", 0),
]
INTERVALS = [("every-90s", 90, 0), ("every-7s", 7, 0), ("hourly-interval", 3600, 1800), ("every-minute", 60, 0)]
ONCE = [("once-in", "2026-03-28T18:30:40Z", 0), ("once-spread", "2026-03-29T06:00:00Z", 3000),
        ("once-after", "2026-03-30T18:00:00Z", 0)]


def _job(name, owner, schedule, seconds, **fields):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", owner=owner, spread=seconds, **fields),
                    schedule)


@pytest.fixture
def fleet(db):
    """The jobs above, the owner's and the staff's, plus some that the forecast leaves out."""
    people = make_personas()
    Job.objects.filter(pk=people.job.pk).delete()
    with time_machine.travel(NOW - timedelta(minutes=30), tick=False):
        # Made half an hour ago: the intervals' next slots lie on grids of their own.
        for name, every, seconds in INTERVALS:
            _job(name, people.owner, {"type": "interval", "every_seconds": every}, seconds)
    with time_machine.travel(NOW, tick=False):
        for i, (name, expression, zone, seconds) in enumerate(CRONS):
            _job(name, people.owner if i % 2 else people.staff,
                 {"type": "cron", "cron": expression, "timezone": zone}, seconds)
        for name, moment, seconds in ONCE:
            _job(name, people.owner, {"type": "once", "run_at": moment}, seconds)
        _job("disabled", people.owner, {"type": "cron", "cron": "* * * * *", "timezone": "UTC"}, 0, enabled=False)
        _job("manual", people.owner, {"type": "manual"}, 0)
        # An interval job whose next slot passed while the scheduler was down: its grid goes on.
        late = _job("late-interval", people.owner, {"type": "interval", "every_seconds": 600}, 0)
    Job.objects.filter(pk=late.pk).update(next_run_at=NOW - timedelta(minutes=25, seconds=3))
    return people


def brute_force(jobs, start, hours):
    """{minute index: [job names]} walked job by job, slot by slot, from the test's own rules."""
    end = start + timedelta(hours=hours)
    due = defaultdict(list)
    for job in jobs.filter(enabled=True).select_related("crontab", "interval", "clocked"):
        offset = timedelta(seconds=spread.offset_seconds(job.name, job.spread))
        if job.schedule_type == "cron":
            expression = spread.resolve(job.cron_text or job.cron_expression, job.name)
            slots = [s + offset for s in dst_oracle.slots_between(expression, str(job.crontab.timezone),
                                                                  start - offset, end - offset)]
        elif job.schedule_type == "interval":
            every = timedelta(seconds=job.interval.every)
            slot, slots = job.next_run_at, []
            while slot < end:
                if slot >= start:
                    slots.append(slot)
                slot += every
        elif job.schedule_type == "once":
            slots = [s for s in [job.next_run_at] if s is not None and start <= s < end]
        else:
            slots = []
        for slot in slots:
            due[int((slot - start).total_seconds() // 60)].append(job.name)
    return due


def as_list(due, hours):
    return [len(due.get(m, [])) for m in range(hours * 60)]


@pytest.mark.parametrize("hours", [1, 24, 30])
def test_the_forecast_counts_what_each_job_walked_slot_by_slot_counts(fleet, hours):
    due = brute_force(Job.objects.all(), START, hours)
    with time_machine.travel(NOW, tick=False):
        answer = fleet.client(fleet.staff).get(f"/api/forecast/?hours={hours}&peaks=5&jobs=50")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["per_minute"] == as_list(due, hours)
    assert body["total_runs"] == sum(len(names) for names in due.values())
    # The peaks: the busiest minutes, earliest first among equals, each with its jobs.
    expected = sorted((m for m in due), key=lambda m: (-len(due[m]), m))[:5]
    assert [datetime.fromisoformat(p["minute"]) for p in body["peaks"]] == [START + timedelta(minutes=m) for m in expected]
    for peak, minute in zip(body["peaks"], expected, strict=True):
        assert peak["runs"] == len(due[minute])
        assert sorted(job["name"] for job in peak["jobs"]) == sorted(set(due[minute]))
        assert (peak["jobs_total"], peak["jobs_more"]) == (len(set(due[minute])), 0)


def test_the_spring_forward_night_is_in_the_count(fleet):
    """02:00 and 02:30 Berlin do not exist on 29 March: their slots run at 03:00 and 03:30 (the
    README's rule), so the UTC minutes 01:00 and 01:30 hold the night's shifted slots."""
    due = brute_force(Job.objects.filter(name="berlin-0230"), START, 24)
    assert list(due) == [int((datetime(2026, 3, 29, 1, 30, tzinfo=UTC) - START).total_seconds() // 60)]
    with time_machine.travel(NOW, tick=False):
        body = forecasts.forecast(Job.objects.filter(name="berlin-0230"), NOW, 24)
    assert body["per_minute"] == as_list(due, 24)


def test_a_user_who_is_not_staff_sees_only_their_jobs(fleet):
    due = brute_force(Job.objects.filter(owner=fleet.owner), START, 24)
    with time_machine.travel(NOW, tick=False):
        body = fleet.client(fleet.owner).get("/api/forecast/?jobs=200").json()
        outsider = fleet.client(fleet.outsider).get("/api/forecast/").json()
    assert body["per_minute"] == as_list(due, 24)
    owned = set(Job.objects.filter(owner=fleet.owner).values_list("name", flat=True))
    assert {job["name"] for peak in body["peaks"] for job in peak["jobs"]} <= owned
    assert body["worker_slots_seen"] is None  # the workers are the operators'
    assert outsider["total_runs"] == 0 and outsider["peaks"] == []


def test_a_peak_needs_the_worker_slots_of_its_jobs_recent_durations(fleet):
    top = ["top-of-hour-a", "top-of-hour-b", "top-of-hour-c"]
    for name, seconds in zip(top, (40.0, 20.0, 30.0), strict=True):  # one schedule: their mean, 30 s
        JobHourCounts.objects.create(job=Job.objects.get(name=name), hour=START - timedelta(hours=2), timed=2,
                                     succeeded=2, seconds=2 * seconds)
    JobHourCounts.objects.create(job=Job.objects.get(name="top-of-hour-a"), hour=START - timedelta(days=3),
                                 timed=1, succeeded=1, seconds=5000)  # too old to count
    jobs = Job.objects.filter(name__in=top)
    run = JobRun.objects.create(job=jobs[0], scheduled_for=START)
    for number, (worker, pid) in enumerate((("w1", 1), ("w1", 2), ("w2", 1), ("w2", 1)), start=1):
        JobAttempt.objects.create(run=run, number=number, worker=worker, pid=pid, started_at=NOW - timedelta(minutes=2))
    JobAttempt.objects.create(run=run, number=5, worker="gone", pid=9, started_at=NOW - timedelta(hours=1))
    with time_machine.travel(NOW, tick=False):
        body = fleet.client(fleet.staff).get("/api/forecast/?hours=2").json()
        only_top = forecasts.forecast(jobs, NOW, 2)
    assert body["worker_slots_seen"] == 3
    # Each hour the three start together: 3 runs of 30 s in one minute hold 90 s of slots: 2 slots.
    assert [p["runs"] for p in only_top["peaks"]] == [3, 3]
    assert [p["worker_slots_needed"] for p in only_top["peaks"]] == [2, 2]


def test_the_page_shows_the_peaks_and_suggests_a_spread(fleet):
    with time_machine.travel(NOW, tick=False):
        page = browser(fleet.staff).get("/forecast/?hours=24")
        body = forecasts.forecast(Job.objects.all(), NOW, 24)
    assert page.status_code == 200
    text = page.content.decode()
    busiest = body["peaks"][0]
    assert busiest["minute"].strftime("%H:%M") in text
    assert busiest["suggestion"] and busiest["suggestion"]["spread_seconds"] >= 120
    assert f'value="{busiest["suggestion"]["spread_seconds"]}"' in text
    assert "Apply" in text
    with time_machine.travel(NOW, tick=False):
        theirs = browser(fleet.owner).get("/forecast/").content.decode()
        refused = browser(fleet.owner).get("/forecast/?hours=1000000").content.decode()
    assert "Apply" not in theirs and "every job of this minute" not in theirs
    assert "hours: Must be a whole number from 1 to 168." in refused


def test_staff_spread_every_job_of_a_peak_minute_from_the_page(fleet):
    with time_machine.travel(NOW, tick=False):
        minute = forecasts.forecast(Job.objects.all(), NOW, 24)["peaks"][0]["minute"]
        expected = set(brute_force(Job.objects.all(), START, 24)[int((minute - START).total_seconds() // 60)])
        refused = browser(fleet.owner).post("/forecast/spread/", {"minute": minute.isoformat(), "all": "1",
                                                                  "spread": "300"})
        assert refused.status_code == 403
        done = browser(fleet.staff).post("/forecast/spread/", {"minute": minute.isoformat(), "all": "1",
                                                               "spread": "300"})
    assert done.status_code == 302
    assert set(Job.objects.filter(spread=300).values_list("name", flat=True)) == expected
    assert work_entries().filter(action=Action.CHANGE).count() == len(
        [name for name in expected if Job.objects.get(name=name).spread == 300])


@pytest.mark.parametrize("query", ["hours=-1", "hours=0", "hours=169", "hours=1000000000", "hours=abc",
                                   "hours=1e3", "hours=24%3B%20drop%20table%20jobs_job", "hours=%00",
                                   "peaks=0", "peaks=51", "jobs=-1", "jobs=x"])
def test_bad_parameters_get_a_400_naming_them(fleet, query):
    answer = fleet.client(fleet.staff).get(f"/api/forecast/?{query}")
    assert answer.status_code == 400
    name = query.split("=")[0]
    assert name in answer.json() and "whole number" in answer.json()[name][0]


def test_the_forecast_needs_a_login(fleet):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/forecast/").status_code in (401, 403)
    assert fleet.client(fleet.staff).get("/api/forecast/").status_code == 200


# --- spreading a peak


def _peak_jobs():
    return list(Job.objects.filter(name__startswith="top-of-hour").order_by("name"))


def test_staff_spread_the_chosen_jobs_in_one_audited_action(fleet):
    jobs = _peak_jobs()
    before = {job.pk: job.next_run_at for job in jobs}
    with time_machine.travel(NOW, tick=False):
        answer = fleet.client(fleet.staff).post("/api/forecast/spread/", {"jobs": [j.pk for j in jobs], "spread": 600},
                                                format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"changed": 3}
    for job in Job.objects.filter(pk__in=before):
        assert job.spread == 600
        assert job.next_run_at == before[job.pk] + timedelta(seconds=spread.offset_seconds(job.name, 600))
    entries = work_entries().filter(action=Action.CHANGE, job__in=jobs)
    assert sorted(e.job_id for e in entries) == sorted(before)
    assert all(e.changes["spread"] == [0, 600] and e.actor == fleet.staff and "forecast" in e.detail for e in entries)
    # The minute is no longer a peak of three: the jobs' slots are where the forecast says they are.
    with time_machine.travel(NOW, tick=False):
        body = forecasts.forecast(Job.objects.filter(pk__in=before), NOW, 2)
    assert body["per_minute"] == as_list(brute_force(Job.objects.filter(pk__in=before), START, 2), 2)


@pytest.mark.parametrize("body, field", [
    ({"jobs": [], "spread": 60}, "jobs"), ({"jobs": ["a"], "spread": 60}, "jobs"),
    ({"jobs": [999999], "spread": 60}, "jobs"), ({"spread": 60}, "jobs"),
    ({"jobs": [1], "spread": -1}, "spread"), ({"jobs": [1], "spread": 86401}, "spread"),
    ({"jobs": [1], "spread": "lots"}, "spread"), ({"jobs": "1; drop table jobs_job", "spread": 60}, "jobs"),
])
def test_a_bad_spread_request_gets_a_400_and_changes_nothing(fleet, body, field):
    if body.get("jobs") == [1]:
        body = {**body, "jobs": [_peak_jobs()[0].pk]}
    answer = fleet.client(fleet.staff).post("/api/forecast/spread/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()
    assert not Job.objects.filter(spread=600).exists() and not work_entries().filter(action=Action.CHANGE).exists()


def test_only_staff_may_spread_even_their_own_jobs(fleet):
    mine = list(Job.objects.filter(owner=fleet.owner).values_list("pk", flat=True))
    spreads = dict(Job.objects.values_list("pk", "spread"))
    for user in (fleet.owner, fleet.outsider):
        answer = fleet.client(user).post("/api/forecast/spread/", {"jobs": mine, "spread": 600}, format="json")
        assert answer.status_code == 403
    assert dict(Job.objects.values_list("pk", "spread")) == spreads
    assert not work_entries().filter(action=Action.CHANGE).exists()


def test_staff_without_the_command_permission_may_not_spread_a_command_job(fleet):
    command = save_job(Job(name="cmd", kind="command", target="true", owner=fleet.owner),
                       {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    answer = fleet.client(fleet.staff).post("/api/forecast/spread/", {"jobs": [command.pk, _peak_jobs()[0].pk],
                                                                      "spread": 600}, format="json")
    assert answer.status_code == 403
    assert not Job.objects.filter(spread=600).exists()
    runner = User.objects.create_user("staff-runner", is_staff=True)
    runner.groups.add(*fleet.runner.groups.all())
    answer = fleet.client(runner).post("/api/forecast/spread/", {"jobs": [command.pk], "spread": 600}, format="json")
    assert answer.status_code == 200 and Job.objects.get(pk=command.pk).spread == 600


@pytest.mark.django_db
def test_a_job_id_past_a_bigint_is_a_400_not_a_server_error(admin_client):
    answer = admin_client.post("/api/forecast/spread/", {"spread": 60, "jobs": [2**127, 5]},
                               content_type="application/json")
    assert answer.status_code == 400 and "jobs" in answer.json()


@pytest.mark.django_db
def test_a_day_a_calendar_closes_has_no_runs_in_the_forecast_of_cron_and_interval_jobs():
    from .test_calendars import make_calendar

    closed = NOW.date() + timedelta(days=1)  # Sunday 29 March 2026
    make_calendar("closures", {closed: "Closed"})
    with time_machine.travel(NOW - timedelta(minutes=30), tick=False):
        _job("noon-closed", None, {"type": "cron", "cron": "0 12 * * *", "timezone": "UTC"}, 0, calendars=["closures"])
        _job("noon-open", None, {"type": "cron", "cron": "0 12 * * *", "timezone": "UTC"}, 0)
        _job("hourly-closed", None, {"type": "interval", "every_seconds": 3600}, 0, calendars=["closures"])
    with time_machine.travel(NOW, tick=False):
        body = forecasts.forecast(Job.objects.all(), NOW, 72)
    # The test's own count, hour by hour over the window from the minute of NOW.
    due = defaultdict(int)
    for minute in range(72 * 60):
        at = START + timedelta(minutes=minute)
        if at.minute == 0 and at.hour == 12:
            due[minute] += 1 + (at.date() != closed)  # noon-open, and noon-closed but on the closed day
    anchor = NOW - timedelta(minutes=30) + timedelta(seconds=3600)  # an interval's first slot: saved + every
    at = anchor
    while at < START + timedelta(hours=72):
        if at >= START and at.date() != closed:
            due[int((at - START).total_seconds() // 60)] += 1
        at += timedelta(seconds=3600)
    assert body["per_minute"] == [due.get(m, 0) for m in range(72 * 60)]


@pytest.mark.django_db
def test_slots_a_hold_window_covers_are_left_out_and_a_mute_windows_slots_are_not():
    from jobs.actions import windows as window_actions
    from jobs.actions.jobs import Actor
    from jobs.models import Window

    quarter = {"type": "cron", "cron": "*/15 * * * *", "timezone": "UTC"}
    with time_machine.travel(NOW, tick=False):
        by_tag = _job("held-by-tag", None, quarter, 0, tags=["db"])
        by_id = _job("held-by-id", None, {"type": "interval", "every_seconds": 60}, 0)
        _job("free", None, quarter, 0)
        _job("muted", None, quarter, 0, tags=["quiet"])
        upgrade = (START + timedelta(hours=2), START + timedelta(hours=3))
        for window in [Window(name="upgrade", mode="hold", starts_at=upgrade[0], ends_at=upgrade[1], tags=["db"],
                              jobs=[by_id.pk]),
                       Window(name="nightly", mode="hold", cron="0 20 * * *", duration_seconds=1800, timezone="UTC",
                              jobs=[by_tag.pk]),
                       Window(name="quiet", mode="mute", starts_at=START, ends_at=START + timedelta(hours=24),
                              tags=["quiet"])]:
            window_actions.create(Actor.command_line(), window)
        body = forecasts.forecast(Job.objects.all(), NOW, 24)

    # The test's own count, minute by minute: three quarter-hour jobs, and the interval job every
    # minute from a minute after it was saved (NOW, at second 20 of its minute).
    nightly = (datetime(2026, 3, 28, 20, 0, tzinfo=UTC), datetime(2026, 3, 28, 20, 30, tzinfo=UTC))
    due, held = [0] * (24 * 60), 0
    for minute in range(24 * 60):
        at = START + timedelta(minutes=minute)
        if at.minute % 15 == 0:
            for name in ("held-by-tag", "free", "muted"):
                if name == "held-by-tag" and any(start <= at < end for start, end in (upgrade, nightly)):
                    held += 1
                else:
                    due[minute] += 1
        if minute >= 1:
            if upgrade[0] <= at + timedelta(seconds=20) < upgrade[1]:
                held += 1
            else:
                due[minute] += 1
    assert held == 4 + 60 + 2
    assert body["per_minute"] == due
    assert (body["held_runs"], body["total_runs"]) == (held, sum(due))
    client = Client()
    client.force_login(User.objects.create_user("operator", is_staff=True))
    with time_machine.travel(NOW, tick=False):
        page = client.get("/forecast/").content.decode()
    assert f"{sum(due)} runs in 24 h" in page
    assert f"{held} held by maintenance windows, not counted" in page
