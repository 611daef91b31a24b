"""Each DST policy of a job (``dst_skipped``: shift, skip; ``dst_repeated``: first, second, both)
against the test's own oracle (tests/dst_oracle.py: it walks UTC minutes, no croniter, no PEP 495
fold), on the named nights, every zone's changes in 2026-2030 and any expression; and the
``dst_preview`` of the API against the oracle's own changes of the zone.

The service's slots come from a job's schedule and policy (``Job.slots_between``, what the slot
report, "why", backfill and the previews use; dispatch steps with ``Job.slot_after``, the same
function).
"""

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.definitions import jobs as definitions
from jobs.definitions.jobs import save_job
from jobs.models import Job

from . import dst_oracle
from .api_personas import make_personas
from .test_dst_slots import changed_hour, first_of_each_kind, hour_fields, hours_around, minute_fields

pytestmark = pytest.mark.postgres("the policies' slot math and its oracle read no database: once, on PostgreSQL, is enough")

POLICIES = list(itertools.product(["shift", "skip"], ["first", "second", "both"]))
BERLIN = ZoneInfo("Europe/Berlin")
BERLIN_SPRING_2027 = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 02:00 CET -> 03:00 CEST
BERLIN_AUTUMN_2027 = datetime(2027, 10, 31, 1, 0, tzinfo=UTC)  # 03:00 CEST -> 02:00 CET
LORD_HOWE_SPRING_2026 = datetime(2026, 10, 3, 15, 30, tzinfo=UTC)  # 02:00 +10:30 -> 02:30 +11:00
LORD_HOWE_AUTUMN_2027 = datetime(2027, 4, 3, 15, 0, tzinfo=UTC)  # 02:00 +11:00 -> 01:30 +10:30


def policy_job(expression, zone_name, skipped, repeated):
    job = definitions.preview_schedule({"type": "cron", "cron": expression, "timezone": zone_name})
    job.dst_skipped, job.dst_repeated = skipped, repeated
    return job


def service_slots(expression, zone_name, start, end, skipped, repeated):
    return policy_job(expression, zone_name, skipped, repeated).slots_between(start, end, 100_000)


def compare(expression, zone_name, transition, skipped, repeated):
    """The service's slots of the local days before, of and after the change, against the oracle's."""
    day_of = transition.astimezone(ZoneInfo(zone_name)).date()
    start, end, expected = dst_oracle.policy_oracle_slots(expression, zone_name, transition, day_of, skipped,
                                                          repeated)
    got = service_slots(expression, zone_name, start, end, skipped, repeated)
    assert got == expected, (expression, zone_name, skipped, repeated)
    assert all(a < b for a, b in zip(got, got[1:], strict=False))  # strictly increasing instants
    return expected


NEAR = timedelta(hours=5)  # either side of a change: the hours of ``hours_around`` and more


def compare_near(expression, zone_name, transition, skipped, repeated):
    """The same over the hours either side of the change only (the zone sweep's many changes; the
    oracle walks the 8 hours either side, which hold every slot the 5 hours' can shift from)."""
    start, end = transition - NEAR, transition + NEAR
    expected = dst_oracle.policy_slots_between(expression, zone_name, start, end, skipped, repeated, hours=8)
    assert service_slots(expression, zone_name, start, end, skipped, repeated) == expected, (
        expression, zone_name, transition, skipped, repeated)
    return expected


def on_day(slots, zone_name, day):
    zone = ZoneInfo(zone_name)
    return [s.astimezone(zone).strftime("%H:%M %Z") for s in slots if s.astimezone(zone).date() == date.fromisoformat(day)]


# --- the named nights, each policy


@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_berlins_nights_under_each_policy_match_the_oracle(skipped, repeated):
    spring = compare("*/15 2 * * *", "Europe/Berlin", BERLIN_SPRING_2027, skipped, repeated)
    autumn = compare("*/15 2 * * *", "Europe/Berlin", BERLIN_AUTUMN_2027, skipped, repeated)
    compare("0,30 2,3 * * *", "Europe/Berlin", BERLIN_SPRING_2027, skipped, repeated)
    compare("0,30 1-3 * * *", "Europe/Berlin", BERLIN_AUTUMN_2027, skipped, repeated)
    # What each policy means, in Berlin's words (the oracle said the same above).
    assert on_day(spring, "Europe/Berlin", "2027-03-28") == (
        ["03:00 CEST", "03:15 CEST", "03:30 CEST", "03:45 CEST"] if skipped == "shift" else [])
    first, second = ["02:00 CEST", "02:15 CEST", "02:30 CEST", "02:45 CEST"], ["02:00 CET", "02:15 CET", "02:30 CET",
                                                                                "02:45 CET"]
    assert on_day(autumn, "Europe/Berlin", "2027-10-31") == {"first": first, "second": second,
                                                              "both": first + second}[repeated]


@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_lord_howes_half_hour_changes_under_each_policy_match_the_oracle(skipped, repeated):
    spring = compare("*/10 2 * * *", "Australia/Lord_Howe", LORD_HOWE_SPRING_2026, skipped, repeated)
    compare("5,15 2 * * *", "Australia/Lord_Howe", LORD_HOWE_SPRING_2026, skipped, repeated)
    autumn = compare("*/20 1 * * *", "Australia/Lord_Howe", LORD_HOWE_AUTUMN_2027, skipped, repeated)
    # 02:00, 02:10, 02:20 are skipped; shifted by 30 minutes they fall on 02:30, 02:40, 02:50: one slot each.
    assert on_day(spring, "Australia/Lord_Howe", "2026-10-04") == ["02:30 +11", "02:40 +11", "02:50 +11"]
    # 01:40 is read twice (01:30-01:59); 01:00 and 01:20 come before the change.
    twice = {"first": ["01:40 +11"], "second": ["01:40 +1030"], "both": ["01:40 +11", "01:40 +1030"]}[repeated]
    assert on_day(autumn, "Australia/Lord_Howe", "2027-04-04") == ["01:00 +11", "01:20 +11", *twice]


@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_the_southern_hemisphere_and_a_midnight_gap_under_each_policy_match_the_oracle(skipped, repeated):
    compare("15,45 2 * * *", "Australia/Sydney", datetime(2026, 10, 3, 16, 0, tzinfo=UTC), skipped, repeated)
    compare("15,45 2 * * *", "Australia/Sydney", datetime(2027, 4, 3, 16, 0, tzinfo=UTC), skipped, repeated)
    compare("*/20 0 * * *", "America/Santiago", datetime(2026, 9, 6, 4, 0, tzinfo=UTC), skipped, repeated)
    compare("*/20 23 * * *", "America/Santiago", datetime(2027, 4, 4, 3, 0, tzinfo=UTC), skipped, repeated)


@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_apias_skipped_day_under_each_policy_matches_the_oracle(skipped, repeated):
    skipped_day = datetime(2011, 12, 30, 10, 0, tzinfo=UTC)
    slots = compare("0 9,18 30 12 *", "Pacific/Apia", skipped_day, skipped, repeated)
    assert len(slots) == (2 if skipped == "shift" else 0)
    compare("0 9 * * *", "Pacific/Apia", skipped_day, skipped, repeated)


@pytest.mark.parametrize("zone_name", ["Europe/Dublin", "Africa/Casablanca", "Antarctica/Troll", "America/Havana"])
@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_zones_with_negative_dst_or_odd_changes_follow_each_policy(zone_name, skipped, repeated):
    changes = [(at, before, after) for name, at, before, after in dst_oracle.transitions_2026_2030()
               if name == zone_name][:4]
    assert {after > before for _, before, after in changes} == {True, False}, f"{zone_name}: no jump and fall back"
    for at, before, after in changes:
        compare(f"*/15 {changed_hour(zone_name, at, after > before)} * * *", zone_name, at, skipped, repeated)


def test_every_zone_that_changes_in_2026_2030_follows_each_policy_on_its_first_jump_and_fall_back():
    """Each policy against the oracle, and what the policies add up to: ``both`` is the union of
    ``first`` and ``second``; ``skip`` runs a subset of what ``shift`` runs."""
    chosen = first_of_each_kind()
    assert len({name for name, _ in chosen}) > 150  # every zone with a change, not a handful
    for zone_name, at in chosen:
        hour = changed_hour(zone_name, at, (at - dst_oracle.MINUTE).astimezone(ZoneInfo(zone_name)).utcoffset()
                            < at.astimezone(ZoneInfo(zone_name)).utcoffset())
        expression = f"*/15 {hour},{(hour + 1) % 24} * * *"  # the changed hour and the one its slots shift into
        slots = {policy: set(compare_near(expression, zone_name, at, *policy)) for policy in POLICIES}
        for skipped in ("shift", "skip"):
            assert slots[skipped, "both"] == slots[skipped, "first"] | slots[skipped, "second"]
        for repeated in ("first", "second", "both"):
            assert slots["skip", repeated] <= slots["shift", repeated]


# --- any expression (the fields test_dst_slots.py draws), any zone's change, any policy


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_any_minute_and_hour_fields_in_any_zones_change_under_any_policy_match_the_oracle(data):
    zone_name, at, _, _ = data.draw(st.sampled_from(dst_oracle.transitions_2026_2030()), label="change")
    skipped, repeated = data.draw(st.sampled_from(POLICIES), label="policy")
    minute = data.draw(minute_fields(), label="minute")
    hour = data.draw(hour_fields(hours_around(zone_name, at)), label="hour")
    expression = f"{minute} {hour} * * *"
    compare_near(expression, zone_name, at, skipped, repeated)
    # Stepping slot by slot from any moment of the night gives the same slots (dispatch's way).
    job = policy_job(expression, zone_name, skipped, repeated)
    moment = at + timedelta(minutes=data.draw(st.integers(-150, 150), label="from"))
    expected = dst_oracle.policy_slots_between(expression, zone_name, moment + timedelta(microseconds=1),
                                               at + NEAR, skipped, repeated, hours=8)
    assert job.upcoming_slots(min(len(expected), 6), after=moment) == expected[:6]


# --- dst_preview in the API, against the oracle's changes of the zone


def preview_job(people, name, expression, zone_name, **policy):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", owner=people.owner, group=people.team,
                        **policy), {"type": "cron", "cron": expression, "timezone": zone_name})


NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def oracle_changes(zone_name, count=2):
    return dst_oracle.zone_transitions(zone_name, NOW.replace(hour=0), NOW + timedelta(days=800))[:count]


@pytest.mark.django_db
@pytest.mark.parametrize(("zone_name", "expression"), [("Europe/Berlin", "*/30 2 * * *"),
                                                       ("Australia/Lord_Howe", "*/10 1,2 * * *")])
@pytest.mark.parametrize(("skipped", "repeated"), POLICIES)
def test_the_api_previews_the_next_two_changes_and_each_affected_slot_as_the_oracle_has_them(
        zone_name, expression, skipped, repeated):
    people = make_personas()
    with time_machine.travel(NOW, tick=False):
        job = preview_job(people, "previewed", expression, zone_name, dst_skipped=skipped, dst_repeated=repeated)
        preview = people.client(people.owner).get(f"/api/jobs/{job.pk}/").json()["dst_preview"]

    changes = oracle_changes(zone_name)
    assert len(changes) == 2
    assert preview["timezone"] == zone_name and (preview["dst_skipped"], preview["dst_repeated"]) == (skipped, repeated)
    assert [t["at"] for t in preview["transitions"]] == [at.isoformat().replace("+00:00", "Z") for at, _, _ in changes]
    assert [t["kind"] for t in preview["transitions"]] == [
        "skipped" if after > before else "repeated" for _, before, after in changes]
    matches = dst_oracle.matcher(expression)
    instants = {}
    for (at, _, _), shown in zip(changes, preview["transitions"], strict=True):
        # The clock reads local_before just before the change (the minute after its last reading
        # before it) and local_after at it.
        zone = ZoneInfo(zone_name)
        last_before = (at - dst_oracle.MINUTE).astimezone(zone).replace(tzinfo=None)
        assert datetime.fromisoformat(shown["local_before"]) == last_before + dst_oracle.MINUTE
        assert datetime.fromisoformat(shown["local_after"]) == at.astimezone(zone).replace(tzinfo=None)
        # The affected wall-clock slots: those the oracle's walk skipped or read twice at this change.
        instants = dst_oracle.policy_instants(zone_name, at, skipped, repeated)
        read, skipped_walls = dst_oracle.wall_readings(zone_name, at)
        near = [w for w in sorted(instants) if abs(w - last_before) < timedelta(hours=2)]
        affected = [w for w in near if matches(w) and (w in skipped_walls and w not in read or len(read.get(w, ())) > 1)]
        assert [slot["wall"] for slot in shown["slots"]] == [w.isoformat() for w in affected]
        assert [slot["runs_at"] for slot in shown["slots"]] == [
            [i.isoformat().replace("+00:00", "Z") for i in instants[w]] for w in affected]
        assert all(slot["text"].startswith(f"{datetime.fromisoformat(slot['wall']):%H:%M} on ") for slot in shown["slots"])
    assert instants  # the oracle was asked


@pytest.mark.django_db
def test_berlins_preview_says_what_happens_in_words():
    people = make_personas()
    with time_machine.travel(datetime(2026, 1, 10, tzinfo=UTC), tick=False):
        client = people.client(people.owner)
        texts = {}
        for skipped, repeated in [("shift", "first"), ("skip", "both"), ("shift", "second")]:
            job = preview_job(people, f"words-{skipped}-{repeated}", "30 2 * * *", "Europe/Berlin",
                              dst_skipped=skipped, dst_repeated=repeated)
            preview = client.get(f"/api/jobs/{job.pk}/").json()["dst_preview"]
            texts[skipped, repeated] = [(t["description"], [s["text"] for s in t["slots"]])
                                        for t in preview["transitions"]]
    assert texts["shift", "first"] == [
        ("Clocks jump forward from 02:00 to 03:00 on 29 March 2026 (CET to CEST)",
         ["02:30 on 29 March runs at 03:30 (policy dst_skipped=shift)"]),
        ("Clocks fall back from 03:00 to 02:00 on 25 October 2026 (CEST to CET)",
         ["02:30 on 25 October runs once, at 02:30 CEST (its first occurrence; policy dst_repeated=first)"])]
    assert texts["skip", "both"] == [
        ("Clocks jump forward from 02:00 to 03:00 on 29 March 2026 (CET to CEST)",
         ["02:30 on 29 March is skipped (it does not exist; policy dst_skipped=skip)"]),
        ("Clocks fall back from 03:00 to 02:00 on 25 October 2026 (CEST to CET)",
         ["02:30 on 25 October runs twice: 02:30 CEST and 02:30 CET (policy dst_repeated=both)"])]
    assert texts["shift", "second"][1][1] == [
        "02:30 on 25 October runs once, at 02:30 CET (its second occurrence; policy dst_repeated=second)"]


@pytest.mark.django_db
def test_a_zone_without_dst_utc_and_other_schedules_preview_no_change_and_lists_leave_it_out():
    people = make_personas()
    assert oracle_changes("Asia/Tokyo") == [] and oracle_changes("UTC") == []  # the oracle agrees: no change
    with time_machine.travel(NOW, tick=False):
        client = people.client(people.owner)
        tokyo = preview_job(people, "tokyo", "30 2 * * *", "Asia/Tokyo", dst_skipped="skip")
        utc = preview_job(people, "utc", "30 2 * * *", "UTC")
        every = save_job(Job(name="every", kind="callable", target="builtin.noop", owner=people.owner),
                         {"type": "interval", "every_seconds": 60})
        shown = {job.name: client.get(f"/api/jobs/{job.pk}/").json()["dst_preview"] for job in (tokyo, utc, every)}
        listed = client.get("/api/jobs/").json()
    assert shown["tokyo"] == {"timezone": "Asia/Tokyo", "dst_skipped": "skip", "dst_repeated": "first",
                              "transitions": []}
    assert shown["utc"]["transitions"] == []
    assert shown["every"] is None
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows and all("dst_preview" not in row and "dst_skipped" in row for row in rows)
