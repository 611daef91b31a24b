"""When slots fall: cron in the job's timezone across DST changes, intervals, one-off moments."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.timing.schedules import cron_slots, next_cron_slot, next_interval_slot


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def daily_0230_slots_on(day, zone):
    """The slots of '30 2 * * *' whose local date is ``day``."""
    start = datetime.fromisoformat(day).replace(tzinfo=ZoneInfo(zone)) - timedelta(days=1)
    slots = cron_slots("30 2 * * *", zone, start.astimezone(UTC), 4)
    return [s.astimezone(ZoneInfo(zone)) for s in slots if s.astimezone(ZoneInfo(zone)).date().isoformat() == day]


@pytest.mark.parametrize(
    ("zone", "day", "expected_local"),
    [
        # Spring forward: 02:30 does not exist; the slot runs once, shifted by the gap, at 03:30.
        ("Europe/Berlin", "2026-03-29", "2026-03-29T03:30:00+02:00"),
        ("America/New_York", "2026-03-08", "2026-03-08T03:30:00-04:00"),
        # Fall back: 02:30 happens twice in Berlin; the slot runs once, at the first (summer time).
        ("Europe/Berlin", "2026-10-25", "2026-10-25T02:30:00+02:00"),
        # In New York the repeated hour is 01:00-02:00, so 02:30 happens once, in standard time.
        ("America/New_York", "2026-11-01", "2026-11-01T02:30:00-05:00"),
    ],
)
def test_a_daily_0230_job_runs_exactly_once_on_dst_days(zone, day, expected_local):
    slots = daily_0230_slots_on(day, zone)
    assert [s.isoformat() for s in slots] == [expected_local]


def test_the_repeated_hour_fires_each_wall_clock_slot_once():
    # New York falls back at 02:00 EDT -> 01:00 EST; a job at 01:30 runs at the first 01:30 only.
    slots = cron_slots("30 1 * * *", "America/New_York", utc("2026-10-31T12:00:00"), 2)
    assert slots[0] == utc("2026-11-01T05:30:00")  # 01:30 EDT
    assert slots[1] == utc("2026-11-02T06:30:00")  # 01:30 EST the next day


def test_a_zone_with_a_30_minute_offset_is_respected():
    slot = next_cron_slot("0 9 * * *", "Asia/Kolkata", utc("2026-06-01T00:00:00"))
    assert slot == utc("2026-06-01T03:30:00")


def test_slots_are_strictly_increasing_through_both_transitions():
    start = utc("2026-03-28T00:00:00")
    slots = cron_slots("*/15 * * * *", "Europe/Berlin", start, 400)
    assert all(b > a for a, b in zip(slots, slots[1:], strict=False))


def test_interval_slots_stay_on_the_grid_of_their_anchor():
    anchor = utc("2026-01-01T00:00:00")
    assert next_interval_slot(60, anchor, anchor) == anchor + timedelta(seconds=60)
    assert next_interval_slot(60, anchor, anchor + timedelta(seconds=61)) == anchor + timedelta(seconds=120)
    assert next_interval_slot(60, anchor, anchor - timedelta(days=1)) == anchor


CRON_FIELD = st.one_of(st.just("*"), st.integers(0, 59).map(str), st.integers(1, 30).map(lambda n: f"*/{n}"))


@settings(max_examples=150, deadline=None)
@given(
    minute=CRON_FIELD,
    hour=st.one_of(st.just("*"), st.integers(0, 23).map(str)),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Adelaide"]),
    offset_minutes=st.integers(0, 60 * 24 * 400),
)
def test_next_slot_matches_croniter_away_from_dst_changes(minute, hour, zone, offset_minutes):
    expression = f"{minute} {hour} * * *"
    if not croniter.is_valid(expression):
        return
    after = utc("2026-01-01T00:00:00") + timedelta(minutes=offset_minutes)
    ours = next_cron_slot(expression, zone, after)
    theirs = croniter(expression, after.astimezone(ZoneInfo(zone))).get_next(datetime)
    tz = ZoneInfo(zone)
    # Near a DST change croniter and we may differ by design (documented rules above).
    if tz.utcoffset(after.replace(tzinfo=None)) != tz.utcoffset(ours.astimezone(tz).replace(tzinfo=None) + timedelta(days=1)):
        return
    assert ours == theirs.astimezone(UTC)
