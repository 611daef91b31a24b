"""Cron slots on the nights clocks change, in every zone with a change in 2026-2030, against the
test's own oracle (tests/dst_oracle.py: no croniter, no PEP 495 fold). The service's slots come from
a job's schedule (``Job.slots_between``, what the slot report, "why", backfill and the previews use;
dispatch steps with ``Job.slot_after``, the same function).
"""

import shutil
import zoneinfo
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.definitions import jobs as definitions

from . import dst_oracle
from .conftest import require
from .dst_oracle import MINUTE, NIGHT_ZONE, oracle_slots, transitions_2026_2030

pytestmark = pytest.mark.postgres("the slot math and its oracle read no database: once, on PostgreSQL, is enough")


def service_slots(expression, zone_name, start, end):
    job = definitions.preview_schedule({"type": "cron", "cron": expression, "timezone": zone_name})
    return job.slots_between(start, end, 100_000)


def compare(expression, zone_name, transition):
    day_of = transition.astimezone(ZoneInfo(zone_name)).date()
    start, end, expected = oracle_slots(expression, zone_name, transition, day_of)
    assert service_slots(expression, zone_name, start, end) == expected
    return expected


def first_of_each_kind():
    """Each zone's first jump forward and first fall back in 2026-2030."""
    chosen = {}
    for name, at, before, after in transitions_2026_2030():
        chosen.setdefault((name, after > before), (name, at))
    return sorted(chosen.values())


def hours_around(zone_name, transition):
    """The hour field of the wall-clock hours from one before the change to two after it."""
    hour = (transition - MINUTE).astimezone(ZoneInfo(zone_name)).hour
    return ",".join(str((hour + k) % 24) for k in range(-1, 3))


def changed_hour(zone_name, transition, jumps):
    """The wall-clock hour the change skips (the first skipped minute's) or reads twice."""
    zone = ZoneInfo(zone_name)
    if jumps:
        return ((transition - MINUTE).astimezone(zone) + MINUTE).hour
    return transition.astimezone(zone).hour


# --- named nights


def local(zone_name, text):
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone_name))


def on_day(slots, zone_name, day):
    return [s.astimezone(ZoneInfo(zone_name)).isoformat() for s in slots
            if s.astimezone(ZoneInfo(zone_name)).date() == date.fromisoformat(day)]


BERLIN_SPRING_2027 = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 02:00 CET -> 03:00 CEST
BERLIN_AUTUMN_2027 = datetime(2027, 10, 31, 1, 0, tzinfo=UTC)  # 03:00 CEST -> 02:00 CET


def test_every_half_hour_slot_of_berlins_skipped_hour_runs_shifted_by_the_gap_once():
    slots = compare("0,30 2 * * *", "Europe/Berlin", BERLIN_SPRING_2027)
    assert on_day(slots, "Europe/Berlin", "2027-03-28") == ["2027-03-28T03:00:00+02:00", "2027-03-28T03:30:00+02:00"]
    # 02:30 shifted is 03:30, itself a slot: one slot (and one run: one run per job and slot).
    slots = compare("0,30 2,3 * * *", "Europe/Berlin", BERLIN_SPRING_2027)
    assert on_day(slots, "Europe/Berlin", "2027-03-28") == ["2027-03-28T03:00:00+02:00", "2027-03-28T03:30:00+02:00"]


def test_every_quarter_hour_slot_of_berlins_skipped_hour_runs_and_of_its_repeated_hour_runs_once():
    slots = compare("*/15 2 * * *", "Europe/Berlin", BERLIN_SPRING_2027)
    assert on_day(slots, "Europe/Berlin", "2027-03-28") == [
        "2027-03-28T03:00:00+02:00", "2027-03-28T03:15:00+02:00", "2027-03-28T03:30:00+02:00",
        "2027-03-28T03:45:00+02:00"]
    # Autumn: 02:00-02:59 is read twice; each slot once, at its first occurrence (summer time).
    slots = compare("*/15 2 * * *", "Europe/Berlin", BERLIN_AUTUMN_2027)
    assert on_day(slots, "Europe/Berlin", "2027-10-31") == [
        "2027-10-31T02:00:00+02:00", "2027-10-31T02:15:00+02:00", "2027-10-31T02:30:00+02:00",
        "2027-10-31T02:45:00+02:00"]


def test_lord_howe_shifts_the_slots_of_its_skipped_half_hour_by_30_minutes():
    # 2026-10-04 02:00 +10:30 -> 02:30 +11:00.
    # 02:00, 02:10, 02:20 shifted by 30 minutes fall on 02:30, 02:40, 02:50: one slot each.
    lord_howe = datetime(2026, 10, 3, 15, 30, tzinfo=UTC)
    slots = compare("*/10 2 * * *", "Australia/Lord_Howe", lord_howe)
    assert on_day(slots, "Australia/Lord_Howe", "2026-10-04") == [
        "2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00", "2026-10-04T02:50:00+11:00"]
    slots = compare("5,15 2 * * *", "Australia/Lord_Howe", lord_howe)
    assert on_day(slots, "Australia/Lord_Howe", "2026-10-04") == ["2026-10-04T02:35:00+11:00", "2026-10-04T02:45:00+11:00"]
    # 2027-04-04 02:00 +11:00 -> 01:30 +10:30: 01:30-01:59 is read twice; each slot once, the first time.
    slots = compare("*/20 1 * * *", "Australia/Lord_Howe", datetime(2027, 4, 3, 15, 0, tzinfo=UTC))
    assert on_day(slots, "Australia/Lord_Howe", "2027-04-04") == [
        "2027-04-04T01:00:00+11:00", "2027-04-04T01:20:00+11:00", "2027-04-04T01:40:00+11:00"]


def test_the_southern_hemisphere_springs_forward_in_october():
    # Sydney: 2026-10-04 02:00 AEST -> 03:00 AEDT.
    slots = compare("15,45 2 * * *", "Australia/Sydney", datetime(2026, 10, 3, 16, 0, tzinfo=UTC))
    assert on_day(slots, "Australia/Sydney", "2026-10-04") == ["2026-10-04T03:15:00+11:00", "2026-10-04T03:45:00+11:00"]
    # Santiago: 2026-09-06 00:00 -04 -> 01:00 -03 (the skipped hour is the first of the day).
    slots = compare("*/20 0 * * *", "America/Santiago", datetime(2026, 9, 6, 4, 0, tzinfo=UTC))
    assert on_day(slots, "America/Santiago", "2026-09-06") == [
        "2026-09-06T01:00:00-03:00", "2026-09-06T01:20:00-03:00", "2026-09-06T01:40:00-03:00"]


def test_apias_skipped_day_runs_its_slots_at_the_same_times_the_next_day():
    # 2011-12-29 24:00 -10:00 -> 2011-12-31 00:00 +14:00: 30 December never came.
    skipped_day = datetime(2011, 12, 30, 10, 0, tzinfo=UTC)
    slots = compare("0 9,18 30 12 *", "Pacific/Apia", skipped_day)
    assert [s.astimezone(ZoneInfo("Pacific/Apia")).isoformat() for s in slots] == [
        "2011-12-31T09:00:00+14:00", "2011-12-31T18:00:00+14:00"]
    # A daily slot of the skipped day falls on the next day's: one slot.
    slots = compare("0 9 * * *", "Pacific/Apia", skipped_day)
    assert [s.astimezone(ZoneInfo("Pacific/Apia")).isoformat() for s in slots] == [
        "2011-12-31T09:00:00+14:00", "2012-01-01T09:00:00+14:00"]
    # Different times on the two days: both run on the 31st, in order.
    slots = compare("30 8 30 12 *", "Pacific/Apia", skipped_day) + compare("0 10 31 12 *", "Pacific/Apia", skipped_day)
    assert [s.astimezone(ZoneInfo("Pacific/Apia")).isoformat() for s in slots] == [
        "2011-12-31T08:30:00+14:00", "2011-12-31T10:00:00+14:00"]


@pytest.mark.parametrize("zone_name", ["Europe/Dublin", "Africa/Casablanca", "Antarctica/Troll", "America/Havana"])
def test_zones_with_negative_dst_or_odd_changes_follow_the_same_rules(zone_name):
    changes = [(at, before, after) for name, at, before, after in transitions_2026_2030() if name == zone_name][:4]
    assert {after > before for _, before, after in changes} == {True, False}, f"{zone_name}: no jump and fall back"
    for at, before, after in changes:
        compare(f"*/15 {changed_hour(zone_name, at, after > before)} * * *", zone_name, at)
        compare(f"*/15 {hours_around(zone_name, at)} * * *", zone_name, at)


def test_every_zone_that_changes_in_2026_2030_gets_every_slot_of_its_first_jump_and_fall_back():
    chosen = first_of_each_kind()
    assert len({name for name, _ in chosen}) > 150  # every zone with a change, not a handful
    for zone_name, at in chosen:
        compare(f"*/10 {hours_around(zone_name, at)} * * *", zone_name, at)


# --- any expression, any zone's change


def minute_fields():
    value = st.integers(0, 59)
    return st.one_of(
        value.map(str),
        st.lists(value, min_size=2, max_size=4, unique=True).map(lambda vs: ",".join(map(str, sorted(vs)))),
        st.tuples(st.integers(0, 29), st.integers(30, 59)).map(lambda ab: f"{ab[0]}-{ab[1]}/5"),
        st.integers(5, 30).map(lambda n: f"*/{n}"),
        st.tuples(st.integers(0, 29), st.integers(3, 20)).map(lambda an: f"{an[0]}/{an[1]}"),
    )


def hour_fields(around):
    value = st.integers(0, 23)
    return st.one_of(
        st.just("*"),
        st.just(around),
        value.map(str),
        st.lists(value, min_size=2, max_size=5, unique=True).map(lambda vs: ",".join(map(str, sorted(vs)))),
        st.tuples(st.integers(0, 11), st.integers(12, 23)).map(lambda ab: f"{ab[0]}-{ab[1]}"),
        st.integers(2, 8).map(lambda n: f"*/{n}"),
    )


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_any_minute_and_hour_fields_in_any_zones_change_match_the_oracle(data):
    zone_name, at, _, _ = data.draw(st.sampled_from(transitions_2026_2030()), label="change")
    minute = data.draw(minute_fields(), label="minute")
    hour = data.draw(hour_fields(hours_around(zone_name, at)), label="hour")
    compare(f"{minute} {hour} * * *", zone_name, at)


def test_a_zone_that_jumps_and_falls_back_within_one_hour_runs_every_slot_once_wherever_the_jump_falls(tmp_path):
    """The DST night test's zone (tests/chaos/test_dst_night.py) jumps and falls back 3 minutes apart,
    often within one UTC hour, where the offsets at the hour's two ends are equal. A jump at each
    minute of an hour, and at the last minutes before the next."""
    require(shutil.which("zic") is not None, "zic is not installed (Debian's libc-bin has it)")
    default_path = zoneinfo.TZPATH
    missed = {}
    try:
        for minute in [*range(60), 60 + 57, 60 + 58, 60 + 59]:
            jump = datetime(2026, 6, 1, 1, tzinfo=UTC) + minute * MINUTE
            zones = dst_oracle.compile_night_zone(jump, tmp_path / str(minute))
            zoneinfo.reset_tzpath(to=[str(zones)])
            zoneinfo.ZoneInfo.clear_cache(only_keys=[NIGHT_ZONE])
            expression, window = dst_oracle.night_schedule(jump)
            expected = dst_oracle.slots_between(expression, NIGHT_ZONE, *window)
            assert expected == [jump, jump + MINUTE, jump + 2 * MINUTE]  # the oracle, checked by hand
            found = service_slots(expression, NIGHT_ZONE, *window)
            if found != expected:
                missed[f"{jump:%H:%M}"] = [f"{at:%H:%M}" for at in found]
    finally:
        zoneinfo.reset_tzpath(to=default_path)
        zoneinfo.ZoneInfo.clear_cache(only_keys=[NIGHT_ZONE])
    assert missed == {}
