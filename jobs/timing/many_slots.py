"""Every slot of a cron expression over hours or days at once, for the forecast: ``slot_after`` one
slot at a time costs about a millisecond (a croniter each), so a week of ``* * * * *`` would take
ten seconds; here it takes milliseconds.

Away from a change of the zone's offset, a wall-clock time has one instant (the wall time minus the
offset) and the slots are the wall times the expression's fields match. Around each change (the
change's size plus an hour either side, where DST rules move, skip or repeat slots) the slots are
asked of ``exact`` (the job's own ``slots_between``), so the DST rule stays in one place. Expressions
with what the fields alone do not say (``L``, ``W``, ``#``) are asked of ``exact`` throughout.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

HOUR = timedelta(hours=1)
CHANGE_REACH = timedelta(hours=25)  # a change of offset this far outside a window can move slots into it (24 h + 1)


def offset_changes(zone, start, end):
    """[(instant, size)] of the changes of ``zone``'s UTC offset in [start, end), to the second."""
    changes = []
    moment, before = start, start.astimezone(zone).utcoffset()
    while moment < end:
        following = min(moment + HOUR, end)
        after = following.astimezone(zone).utcoffset()
        if after != before:
            low, high = int(moment.timestamp()), int(following.timestamp())
            while high - low > 1:
                middle = (low + high) // 2
                low, high = ((middle, high) if datetime.fromtimestamp(middle, UTC).astimezone(zone).utcoffset() == before
                             else (low, middle))
            changes.append((datetime.fromtimestamp(high, UTC), abs(after - before)))
        moment, before = following, after
    return changes


def _fields(expression):
    """The expression's fields as sets (None: every value), or None when the fields alone do not
    say which days match (L, W, #, ?)."""
    minute, hour, dom, month, dow = expression.split()
    if any(mark in dom.upper() for mark in "LW?") or any(mark in dow.upper() for mark in "#L?"):
        return None
    expanded = croniter(expression).expanded
    sets = [None if values == ["*"] else {int(v) for v in values} for values in expanded]
    if sets[4] is not None:
        sets[4] = {v % 7 for v in sets[4]}  # 7 is Sunday too
    return sets


def _walls(sets, first_day, last_day):
    """The matching wall-clock times of the days first_day..last_day, in order (cron's rule: when
    both day of month and day of week are given, either matches)."""
    minutes, hours, doms, months, dows = sets
    minutes = sorted(minutes) if minutes is not None else range(60)
    hours = sorted(hours) if hours is not None else range(24)
    day = first_day
    while day <= last_day:
        if months is None or day.month in months:
            by_dom = doms is None or day.day in doms
            by_dow = dows is None or (day.isoweekday() % 7) in dows
            if (by_dom or by_dow) if (doms is not None and dows is not None) else (by_dom and by_dow):
                for h in hours:
                    for m in minutes:
                        yield datetime(day.year, day.month, day.day, h, m)
        day += timedelta(days=1)


def cron_slots_between(expression, timezone_name, start, end, exact):
    """The slots of ``expression`` in ``timezone_name`` in [start, end), sorted; ``exact(a, b)``
    gives those of [a, b) one by one (``Job.slots_between``)."""
    zone = ZoneInfo(timezone_name)
    sets = _fields(expression)
    if sets is None:
        return exact(start, end)
    asked = []  # [a, b): the stretches around a change of offset, merged
    for instant, size in offset_changes(zone, start - CHANGE_REACH, end + CHANGE_REACH):
        a, b = max(start, instant - size - HOUR), min(end, instant + size + HOUR)
        if a < b:
            if asked and a <= asked[-1][1]:
                asked[-1] = (asked[-1][0], max(asked[-1][1], b))
            else:
                asked.append((a, b))
    slots, cursor = [], start
    for a, b in [*asked, (end, end)]:
        if cursor < a:  # a stretch of one offset
            offset = cursor.astimezone(zone).utcoffset()
            for wall in _walls(sets, (cursor + offset).date(), (a + offset).date()):
                instant = (wall - offset).replace(tzinfo=UTC)
                if cursor <= instant < a:
                    slots.append(instant)
        if a < b:
            slots.extend(exact(a, b))
        cursor = max(cursor, b)
    return sorted(set(slots))
