"""The test's own DST oracle: cron slots of a zone's wall clock without croniter nor PEP 495's fold.

It walks UTC minutes, reads each on the zone's clock, and turns each matching wall-clock minute into
an instant by the documented rule (docs/guide/schedules.md):

- a wall-clock minute the clock reads once or more: its first reading;
- a wall-clock minute the clock skips (it jumps from r to r'): the minute the clock reads at that
  wall time plus the gap (r' - r - 1 min), i.e. shifted forward by the gap. A whole skipped day
  (Pacific/Apia, 2011-12-30) is a gap of 24 h: its slots come at the same wall times the next day.

A slot is an instant: two wall-clock minutes with the same instant (a shifted slot on an ordinary
one) are one slot.
"""

import functools
import subprocess
import zoneinfo
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MINUTE = timedelta(minutes=1)
RANGES = {"minute": (0, 59), "hour": (0, 23), "day": (1, 31), "month": (1, 12), "weekday": (0, 6)}


def field_values(text, field):
    """The values of one cron field: '*', 'a', 'a-b', '*/n', 'a-b/n', 'a/n', and lists of these."""
    low, high = RANGES[field]
    values = set()
    for part in text.split(","):
        spec, _, step = part.partition("/")
        if spec == "*":
            first, last = low, high
        elif "-" in spec:
            first, last = (int(v) for v in spec.split("-"))
        else:
            first = int(spec)
            last = high if step else first
        values.update(range(first, last + 1, int(step or 1)))
    return values


def matcher(expression):
    minute, hour, day, month, weekday = expression.split()
    assert weekday == "*", "the oracle reads day-of-month and month only"
    sets = [field_values(minute, "minute"), field_values(hour, "hour"), field_values(day, "day"),
            field_values(month, "month")]
    return lambda wall: (wall.minute in sets[0] and wall.hour in sets[1] and wall.day in sets[2]
                         and wall.month in sets[3])


@functools.lru_cache(maxsize=64)
def wall_readings(zone_name, around, hours=72):
    """({wall-clock minute: (its instants, in order)}, {skipped wall-clock minute: its instant
    shifted by the gap}) for the ``hours`` either side of the UTC instant ``around``."""
    zone = ZoneInfo(zone_name)
    first = (around - timedelta(hours=hours)).replace(second=0, microsecond=0)
    read, skipped, previous = {}, {}, None
    for step in range(2 * hours * 60):
        instant = first + step * MINUTE
        reading = instant.astimezone(zone).replace(tzinfo=None)
        if previous is not None and reading - previous > MINUTE:
            gap = reading - previous - MINUTE
            wall = previous + MINUTE
            while wall < reading:
                skipped.setdefault(wall, wall + gap - reading + instant)
                wall += MINUTE
        read.setdefault(reading, []).append(instant)
        previous = reading
    return {wall: tuple(at) for wall, at in read.items()}, skipped


@functools.lru_cache(maxsize=64)
def wall_clock(zone_name, around):
    """{wall-clock minute: its instant} for the wall times read in the 3 days either side of the
    UTC instant ``around``, skipped ones included, by the rule above."""
    read, skipped = wall_readings(zone_name, around)
    return {**skipped, **{wall: instants[0] for wall, instants in read.items()}}


def oracle_slots(expression, zone_name, transition, day_of):
    """The slots of the local days before, of and after ``day_of``, and the UTC window they span:
    (start, end, sorted instants in [start, end))."""
    instants = wall_clock(zone_name, transition)
    midnight = datetime.combine(day_of, datetime.min.time())
    start, end = instants[midnight - timedelta(days=1)], instants[midnight + timedelta(days=2)]
    matches = matcher(expression)
    walls = (midnight - timedelta(days=1) + k * MINUTE for k in range(3 * 24 * 60))
    slots = {instants[wall] for wall in walls if matches(wall)}
    return start, end, sorted(slot for slot in slots if start <= slot < end)


def slots_between(expression, zone_name, start, end):
    """The oracle's slots in the UTC range [start, end) (less than 3 days from a change at most)."""
    instants = wall_clock(zone_name, start + (end - start) / 2)
    matches = matcher(expression)
    return sorted({at for wall, at in instants.items() if matches(wall) and start <= at < end})


@functools.lru_cache(maxsize=1)
def transitions_2026_2030():
    """(zone, instant of the change, offset before, offset after) for every change of every zone in
    zoneinfo in 2026-2030, found by reading offsets once a day and bisecting to the second."""
    found = []
    first = datetime(2026, 1, 1, tzinfo=UTC)
    days = (datetime(2031, 1, 1, tzinfo=UTC) - first).days
    for name in sorted(zoneinfo.available_timezones()):
        zone = ZoneInfo(name)
        previous = first.astimezone(zone).utcoffset()
        for day in range(1, days + 1):
            offset = (first + timedelta(days=day)).astimezone(zone).utcoffset()
            if offset != previous:
                low, high = int((first + timedelta(days=day - 1)).timestamp()), int(
                    (first + timedelta(days=day)).timestamp())
                while high - low > 1:
                    middle = (low + high) // 2
                    moved = datetime.fromtimestamp(middle, UTC).astimezone(zone).utcoffset() != previous
                    low, high = (low, middle) if moved else (middle, high)
                found.append((name, datetime.fromtimestamp(high, UTC), previous, offset))
            previous = offset
    return found


# --- each DST policy (a job's dst_skipped and dst_repeated)
#
# From every reading of a wall-clock minute rather than its first: a policy picks, for a minute the
# clock skips, its shifted instant (shift) or none (skip), and for a minute the clock reads twice,
# its first reading, its last one, or both.


@functools.lru_cache(maxsize=64)
def policy_instants(zone_name, around, dst_skipped, dst_repeated, hours=72):
    """{wall-clock minute: its instants under the policy (none, one or two)}."""
    read, skipped = wall_readings(zone_name, around, hours)
    chosen = {}
    for wall, instant in skipped.items():
        if wall not in read:
            chosen[wall] = (instant,) if dst_skipped == "shift" else ()
    for wall, instants in read.items():
        chosen[wall] = {"first": instants[:1], "second": instants[-1:], "both": (instants[0], instants[-1])
                        if len(instants) > 1 else instants}[dst_repeated]
    return chosen


def policy_slots_between(expression, zone_name, start, end, dst_skipped, dst_repeated, hours=72):
    """The oracle's slots under a policy in the UTC range [start, end) (less than ``hours`` from
    its middle, which is less than a day from a change: a gap shifts by a day at most)."""
    instants = policy_instants(zone_name, start + (end - start) / 2, dst_skipped, dst_repeated, hours)
    matches = matcher(expression)
    return sorted({at for wall, ats in instants.items() if matches(wall) for at in ats if start <= at < end})


def policy_oracle_slots(expression, zone_name, transition, day_of, dst_skipped, dst_repeated):
    """``oracle_slots`` under a policy: (start, end, sorted instants in [start, end))."""
    start, end, _ = oracle_slots(expression, zone_name, transition, day_of)
    return start, end, policy_slots_between(expression, zone_name, start, end, dst_skipped, dst_repeated)


def zone_transitions(zone_name, start, end):
    """(instant of the change, offset before, offset after) of every change of one zone in the UTC
    range [start, end), found as ``transitions_2026_2030`` finds them."""
    zone = ZoneInfo(zone_name)
    found = []
    previous = start.astimezone(zone).utcoffset()
    for day in range(1, (end - start).days + 1):
        offset = (start + timedelta(days=day)).astimezone(zone).utcoffset()
        if offset != previous:
            low, high = int((start + timedelta(days=day - 1)).timestamp()), int((start + timedelta(days=day)).timestamp())
            while high - low > 1:
                middle = (low + high) // 2
                moved = datetime.fromtimestamp(middle, UTC).astimezone(zone).utcoffset() != previous
                low, high = (low, middle) if moved else (middle, high)
            found.append((datetime.fromtimestamp(high, UTC), previous, offset))
        previous = offset
    return found


# --- a zone of the tests' own, for a night in minutes

NIGHT_ZONE = "DstTest/Night"
STANDARD = timedelta(hours=1)
GAP = timedelta(minutes=2)  # the wall clock jumps 2 minutes forward at the jump...
FALL_BACK_AFTER = timedelta(minutes=3)  # ...and back 2 minutes this long after


def night_zone_source(jump):
    """zic source of NIGHT_ZONE: standard time UTC+1, 2 minutes forward at ``jump``, back 3 minutes
    later. The rules end the next day: with "only" rules in force to the end, zic writes a footer
    that keeps daylight time all year after the last change, and the zone would jump forward again
    one second after falling back."""
    back = jump + FALL_BACK_AFTER
    after = back + timedelta(days=1)

    def rule(at, save, letter):
        return f"Rule Night {at:%Y} only - {at:%b} {at.day} {at:%H:%M}u {save} {letter}\n"

    return (rule(jump, "0:02", "D") + rule(back, "0", "S")
            + f"Zone {NIGHT_ZONE} 1:00 Night N%sT {after:%Y %b} {after.day} {after:%H:%M}u\n"
            + "\t\t\t1:00 - NST\n")


def compile_night_zone(jump, directory):
    """NIGHT_ZONE jumping at ``jump``, compiled with zic into ``directory``/zones (returned)."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "night.zi"
    source.write_text(night_zone_source(jump))
    zones = directory / "zones"
    subprocess.run(["zic", "-d", str(zones), str(source)], check=True, capture_output=True, timeout=30)
    return zones


def night_schedule(jump):
    """A cron expression of NIGHT_ZONE's wall minutes around ``jump``: the two skipped ones (jump +
    1 h, + 1 h 1 min) and the second of the two read twice (fall back + 1 h 1 min: first at jump +
    2 min, again at jump + 4 min); and the UTC window [start, end) that holds their slots, which
    are jump, jump + 1 min and jump + 2 min."""
    skipped = [jump + STANDARD, jump + STANDARD + MINUTE]
    repeated = jump + FALL_BACK_AFTER + STANDARD + MINUTE
    walls = [*skipped, repeated]
    expression = (f"{','.join(str(w.minute) for w in walls)} {','.join(sorted({str(w.hour) for w in walls}))} "
                  "* * *")
    return expression, (jump - 2 * MINUTE, jump + FALL_BACK_AFTER + GAP)
