"""When a job's slots fall: cron in the job's own timezone, fixed intervals, one moment.

Cron expressions are read with croniter on naive wall-clock times, and each wall-clock slot is
turned into an instant with ``fold=0``. That fixes the two DST cases (documented in the README):

- a slot in the skipped hour (02:30 when clocks jump from 02:00 to 03:00) runs once, shifted
  forward by the gap (at 03:30 local time);
- a slot in the repeated hour (02:30 when clocks fall back from 03:00 to 02:00) runs once, at its
  first occurrence (the earlier instant, still in summer time).

Slots are strictly increasing instants, so no wall-clock slot can fire twice.
"""

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter
from django.core.exceptions import ValidationError


def validate_cron(expression):
    if not isinstance(expression, str):
        raise ValidationError("A cron expression is a string.")
    fields = expression.split()
    if len(fields) != 5:
        raise ValidationError(
            f"A cron expression has 5 fields (minute hour day month weekday), got {len(fields)}."
        )
    if not croniter.is_valid(expression):
        raise ValidationError(f"'{expression}' is not a valid cron expression.")
    try:
        next_cron_slot(expression, "UTC", datetime.now(UTC))
    except (ValueError, KeyError, CroniterError):
        raise ValidationError(f"'{expression}' never matches a date.") from None


def validate_timezone(name):
    if not isinstance(name, str):
        raise ValidationError("A timezone is a string such as 'Europe/Berlin'.")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"'{name}' is not a known IANA timezone.") from None


def next_cron_slot(expression, timezone_name, after):
    """The first slot of ``expression`` strictly after the instant ``after``."""
    zone = ZoneInfo(timezone_name)
    local_after = after.astimezone(zone).replace(tzinfo=None)
    # Back off one minute so a slot at exactly the wall-clock time of `after` in the repeated hour
    # (the second occurrence) is considered and then rejected by the instant comparison.
    cursor = croniter(expression, local_after - timedelta(minutes=1))
    for _ in range(5000):
        wall = cursor.get_next(datetime)
        instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
        if instant > after:
            return instant
    raise ValueError(f"no slot found for {expression!r} after {after}")


def cron_slots(expression, timezone_name, after, count):
    slots = []
    for _ in range(count):
        after = next_cron_slot(expression, timezone_name, after)
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
