"""When a job's slots fall: cron in the job's own timezone, fixed intervals, one moment.

Cron expressions are read with croniter on naive wall-clock times, and each matching wall-clock
time becomes one instant (``wall_instant``, or ``policy_instant`` for a job's own DST policy). The
DST cases (docs/guide/dst.md), by the job's ``dst_skipped`` and ``dst_repeated``:

- ``dst_skipped=shift`` (the default): every slot in a skipped stretch (02:00-02:59 when clocks
  jump from 02:00 to 03:00) runs, each shifted forward by the gap: 02:00, 02:15, 02:30, 02:45 run
  at 03:00, 03:15, 03:30, 03:45, in that order, at distinct instants. A shifted slot that falls on
  an ordinary slot (02:30 shifted and 03:30 in ``0,30 2,3 * * *``) is the same instant, so one
  slot, run once. A whole skipped day (Pacific/Apia went from 2011-12-29 to 2011-12-31) is a gap
  of 24 h like any other: its slots run at the same wall-clock times on the next day, merging with
  that day's slots where they coincide;
- ``dst_skipped=skip``: a slot whose wall-clock time does not exist is not run;
- ``dst_repeated=first`` (the default): a slot in the repeated hour (02:30 when clocks fall back
  from 03:00 to 02:00) runs once, at its first occurrence (``fold=0``: the earlier instant, still
  in summer time);
- ``dst_repeated=second``: once, at its second occurrence (``fold=1``, in winter time);
- ``dst_repeated=both``: at both occurrences, two slots (the union of ``first``'s and ``second``'s).

The instants of shifted slots interleave with the ordinary slots just after the gap, so the next
slot is the earliest instant of the wall times from shortly before ``after`` on, not the first
wall time after it (and, for ``second``, from the wall time ``after`` reads in winter time when it
is in the first reading of a repeated stretch). Every caller (dispatch, catch-up, backfill, the
slot report and "why", the previews) gets its slots from ``next_cron_slot`` (through
``Job.slot_after``): slots are strictly increasing instants, so no wall-clock slot can fire twice
unless its policy is ``both``, and then at two instants.
"""

import copy
import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter
from django.core.exceptions import ValidationError

from ..choices import DstRepeated, DstSkipped
from . import spread


def validate_cron(expression):
    if not isinstance(expression, str):
        raise ValidationError("A cron expression is a string.")
    fields = expression.split()
    if len(fields) != 5:
        raise ValidationError(
            f"A cron expression has 5 fields (minute hour day month weekday), got {len(fields)}."
        )
    _check_cron(spread.resolve(expression, ""))  # H: any job's numbers are as valid as this one's


@functools.lru_cache(maxsize=4096)  # a file of 100,000 jobs holds a few thousand expressions; a refusal is not kept
def _check_cron(expression):
    shown = expression if len(expression) <= 100 else f"{expression[:100]}…"  # not thousands of digits back
    if not croniter.is_valid(expression):
        raise ValidationError(f"'{shown}' is not a valid cron expression.")
    try:
        next_cron_slot(expression, "UTC", datetime.now(UTC))
    except (ValueError, KeyError, CroniterError):
        raise ValidationError(f"'{shown}' never matches a date.") from None


@functools.lru_cache(maxsize=16384)  # a schedule that matches a date now matches one later
def matches_a_date(expression, timezone_name):
    """Whether the cron ``expression`` has a slot in ``timezone_name`` (0 0 31 2 * has none)."""
    try:
        next_cron_slot(expression, timezone_name, datetime.now(UTC))
    except Exception:  # croniter raises several types for a date that never comes
        return False
    return True


def validate_timezone(name):
    if not isinstance(name, str):
        raise ValidationError("A timezone is a string such as 'Europe/Berlin'.")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"'{name}' is not a known IANA timezone.") from None


def wall_instant(wall, zone):
    """The instant of the naive wall-clock time ``wall`` in ``zone``: in a repeated stretch its first
    occurrence; in a skipped one, the wall time read with the offset before the gap, which is the
    wall time shifted forward by the gap (PEP 495's ``fold=0``)."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def policy_instant(wall, zone, skipped, repeated):
    """The instant of the naive wall-clock time ``wall`` in ``zone`` under a DST policy, or None
    when the policy does not run it. For ``repeated``, ``first`` or ``second`` (``both`` is the
    two searched apart). Of PEP 495's two readings, the later one is the second occurrence of a
    repeated wall time, and the earlier one is the gap's wall time shifted backwards: which is
    which tells a repeated wall time from a skipped one."""
    earlier = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    later = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if later < earlier:  # in a gap: ``earlier`` is the wall time shifted forward
        return None if skipped == DstSkipped.SKIP else earlier
    return later if repeated == DstRepeated.SECOND else earlier


GAP_LOOKBACK_HOURS = 26  # longer than any gap (the longest, Apia's and Kwajalein's skipped days: 24 h)


FINE_HOURS = 1  # of the hours around a moment, those read minute by minute (the rest at their ends)


@functools.lru_cache(maxsize=16384)
def _offset_changes(zone, hour, step_minutes=60):
    """The changes of ``zone``'s offset in the UTC ``hour``: (first instant on the new offset, offset
    before, offset after) each, found every ``step_minutes`` and bisected to the second. Real zones
    change at most once in an hour, and the hour's two ends tell; but a zone can jump and fall back
    within one (the DST night test's own zone does), and the two ends are then equal: the hours next
    to the moment asked about are read minute by minute (a gap of minutes matters only there)."""
    def offset(instant):
        return instant.astimezone(zone).utcoffset()

    changes = []
    start, before = hour, offset(hour)
    for minute in range(step_minutes, 61, step_minutes):
        end = hour + timedelta(minutes=minute)
        after = offset(end)
        if after != before:
            low, high = int(start.timestamp()), int(end.timestamp())
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset(datetime.fromtimestamp(middle, UTC)) == before else (low, middle)
            changes.append((datetime.fromtimestamp(high, UTC), before, after))
        start, before = end, after
    return tuple(changes)


@functools.lru_cache(maxsize=4096)
def gaps_before(zone, hour):
    """The gaps of ``zone`` (clocks jumping forward) that started in the GAP_LOOKBACK_HOURS before
    the UTC ``hour`` or within it: (first instant after the jump, offset before it, length)."""
    changes = (change for back in range(GAP_LOOKBACK_HOURS + 1)
               for change in _offset_changes(zone, hour - timedelta(hours=back), 1 if back <= FINE_HOURS else 60))
    return tuple((at, before, after - before) for at, before, after in changes if after > before)


@functools.lru_cache(maxsize=4096)
def folds_after(zone, hour):
    """The falls back of ``zone`` (clocks set back) in the UTC ``hour`` or the GAP_LOOKBACK_HOURS
    after it: (instant of the change, offset after it, length)."""
    changes = (change for ahead in range(GAP_LOOKBACK_HOURS + 1)
               for change in _offset_changes(zone, hour + timedelta(hours=ahead), 1 if ahead <= FINE_HOURS else 60))
    return tuple((at, after, before - after) for at, before, after in changes if after < before)


def second_occurrences_between(zone, after, until):
    """Whether the second reading of a repeated stretch (where only ``second`` and ``both`` have
    slots) may overlap (after, until]: if not, ``both``'s next slot is ``first``'s."""
    if until - after > timedelta(hours=GAP_LOOKBACK_HOURS - 1):
        return True
    hour = after.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    # The falls back from a day before ``after`` (its second reading may still be going on) to a day after.
    folds = folds_after(zone, hour - timedelta(hours=GAP_LOOKBACK_HOURS)) + folds_after(zone, hour)
    return any(set_back_at <= until and after < set_back_at + length for set_back_at, _, length in folds)


def earliest_wall(zone, after, second=False):
    """The wall-clock time from which a slot's instant can be after ``after``: ``after``'s own wall
    time, or, within a gap's length after a gap, the wall time ``after`` would read with the offset
    before the gap (the gap's wall times run shifted past its end), or, with ``second``, in the
    first reading of a repeated stretch, the wall time ``after`` would read with the offset after
    it (the stretch's second occurrences are still to come)."""
    start = after.astimezone(zone).replace(tzinfo=None)
    for jumped_at, offset_before, length in gaps_before(zone, after.replace(minute=0, second=0, microsecond=0)):
        if jumped_at <= after < jumped_at + length:
            start = min(start, (after + offset_before).replace(tzinfo=None))
    if second:  # in the first reading of a repeated stretch, its wall times come again
        for set_back_at, offset_after, length in folds_after(zone, after.replace(minute=0, second=0, microsecond=0)):
            if set_back_at - length <= after < set_back_at:
                start = min(start, (after + offset_after).replace(tzinfo=None))
    return start


@functools.lru_cache(maxsize=8192)  # a file of 100,000 jobs of a realistic mix holds a few thousand expressions
def _parsed(expression):
    return croniter(expression, datetime(2000, 1, 1))


def cron_cursor(expression, start):
    """``croniter(expression, start)``, the expression parsed once per process: parsing it (croniter's
    ``_expand``) was half of a slot's computation, and ``jobs apply`` computes a first slot per job.
    A cursor's walk changes only its own current time; the parsed fields are read, never written."""
    cursor = copy.copy(_parsed(expression))
    cursor.set_current(start, force=True)
    return cursor


# Jobs that share a schedule share their slots: a crowded slot's 10,000 jobs ask the same question
# 10,000 times in a tick, and croniter parsing the expression anew each time was half of dispatching it.
@functools.lru_cache(maxsize=4096)  # a batch of due jobs holds at most JOBS_DISPATCH_BATCH keys
def next_cron_slot(expression, timezone_name, after, skipped=DstSkipped.SHIFT, repeated=DstRepeated.FIRST):
    """The first slot of ``expression`` strictly after the instant ``after``, under the DST policy
    ``skipped`` and ``repeated`` (the module's docstring)."""
    if repeated == DstRepeated.BOTH:  # the slots of both occurrences: the union of first's and second's
        slot = _next_slot(expression, timezone_name, after, skipped, DstRepeated.FIRST)
        if slot is None or second_occurrences_between(ZoneInfo(timezone_name), after, slot):
            slots = [slot, _next_slot(expression, timezone_name, after, skipped, DstRepeated.SECOND)]
            slot = min((s for s in slots if s is not None), default=None)
    else:
        slot = _next_slot(expression, timezone_name, after, skipped, repeated)
    if slot is None:
        raise ValueError(f"no slot found for {expression!r} after {after}")
    return slot


def _next_slot(expression, timezone_name, after, skipped, repeated):
    zone = ZoneInfo(timezone_name)
    after = after.astimezone(UTC)
    default = skipped == DstSkipped.SHIFT and repeated == DstRepeated.FIRST
    second = repeated == DstRepeated.SECOND
    # Back off one minute so a slot at exactly the wall-clock time of `after` in the repeated hour
    # (the second occurrence) is considered and then rejected by the instant comparison.
    cursor = cron_cursor(expression, earliest_wall(zone, after, second) - timedelta(minutes=1))
    best = best_wall = None
    for _ in range(5000):
        wall = cursor.get_next(datetime)
        if best_wall is not None and wall >= best_wall:
            return best  # a wall time at or past the best slot's reading is no earlier instant
        instant = wall_instant(wall, zone) if default else policy_instant(wall, zone, skipped, repeated)
        if instant is None or instant <= after or (best is not None and instant >= best):
            continue
        best, best_wall = instant, instant.astimezone(zone).replace(tzinfo=None)
        if best_wall == wall:
            return best  # not in a gap: no later wall time has an earlier instant
    return best


def cron_slots(expression, timezone_name, after, count, skipped=DstSkipped.SHIFT, repeated=DstRepeated.FIRST):
    slots = []
    for _ in range(count):
        after = next_cron_slot(expression, timezone_name, after, skipped, repeated)
        slots.append(after)
    return slots


def next_interval_slot(every_seconds, anchor, after):
    """The first ``anchor + k * every`` strictly after ``after`` (k >= 0)."""
    if after < anchor:
        return anchor
    periods = int((after - anchor).total_seconds() // every_seconds) + 1
    return anchor + timedelta(seconds=periods * every_seconds)


@functools.lru_cache(maxsize=4096)  # cron_descriptor reads its translations anew on every call
def describe_cron(expression):
    try:
        from cron_descriptor import get_description

        return get_description(expression)
    except Exception:  # the description is a courtesy; never fail a page on it
        return expression
