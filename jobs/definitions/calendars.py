"""Defining calendars: their dates from an iCalendar (ICS) file, and the jobs that follow a change.

An ICS file's events become dates: an all-day event is its date, one of several days each of its
dates (DTEND is exclusive, as RFC 5545 says), a timed event the dates it touches in its own
timezone. Recurring events (RRULE, RDATE, EXDATE) are expanded by ``recurring_ical_events`` over a
bounded window, from the start of last year to the end of the year ``ICS_YEARS_AHEAD`` years on.
The file is refused, with the reason, when it is larger than JOBS_CALENDAR_ICS_MAX_BYTES, is not
iCalendar, has an event that repeats more often than once a day, or expands to more than
``MAX_OCCURRENCES`` occurrences.
"""

from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError

from ..models import Job
from ..models.calendar import MAX_DATES, MAX_LABEL, day_rules_cache

ICS_YEARS_AHEAD = 5
# Occurrences a file may expand to over the window, counted before expanding (recurring_ical_events
# takes about 0.25 ms an occurrence here: 10,000 is a few seconds at worst).
MAX_OCCURRENCES = 10000
# Days of events a file may cover in all (a several-day event counts each of its days in the window).
MAX_DAYS_TOUCHED = 100000
ONE_MICROSECOND = timedelta(microseconds=1)


def ics_window(today):
    """[first, last] dates of the window recurring events are expanded over."""
    return date(today.year - 1, 1, 1), date(today.year + ICS_YEARS_AHEAD, 12, 31)


def _refuse(message):
    return ValidationError({"file": [message]})


def _days_of(event, window_first, window_last):
    """The dates an event occupies within [window_first, window_last] (an event from the year 1 to
    9999 is the window's days, not 3.65 million)."""
    start = event.get("DTSTART")
    start = start.dt if start is not None else None
    if start is None:
        return []
    end = event.get("DTEND")
    end = end.dt if end is not None else None
    if end is None and (duration := event.get("DURATION")) is not None:
        end = start + duration.dt
    if isinstance(start, datetime):
        if end is None or end <= start:
            return [start.date()]
        end = end.astimezone(start.tzinfo) if start.tzinfo and isinstance(end, datetime) else end
        last = (end - ONE_MICROSECOND).date() if isinstance(end, datetime) else end - timedelta(days=1)
    else:
        last = (end - timedelta(days=1)) if isinstance(end, date) and end > start else start
        last = last.date() if isinstance(last, datetime) else last
    first = max(start.date() if isinstance(start, datetime) else start, window_first)
    last = min(last, window_last)
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


SUB_DAILY = ("SECONDLY", "MINUTELY", "HOURLY")


def _as_list(value):
    return value if isinstance(value, list) else [] if value is None else [value]


def _most_occurrences(rule, first, last):
    """At most how many times a (daily or coarser) RRULE repeats in [first, last]: one a day at most."""
    days = (last - first).days + 1
    frequency = (rule.get("FREQ") or [""])[0]
    per = {part: len(rule.get(part) or []) for part in ("BYDAY", "BYMONTHDAY", "BYMONTH", "BYYEARDAY", "BYWEEKNO")}
    in_a_month = max(1, per["BYDAY"] * 5, per["BYMONTHDAY"])
    found = {"DAILY": days, "WEEKLY": (days // 7 + 1) * max(1, per["BYDAY"]), "MONTHLY": (days // 28 + 1) * in_a_month,
             "YEARLY": (days // 365 + 1) * max(1, per["BYMONTH"]) * max(in_a_month, per["BYYEARDAY"],
                                                                      per["BYWEEKNO"] * 7)}.get(frequency, days)
    try:
        interval = max(1, int((rule.get("INTERVAL") or [1])[0]))
        count = int((rule.get("COUNT") or [days])[0])
    except (TypeError, ValueError):
        interval, count = 1, days
    return min(days, count, found // interval + 1)


def _check_rules(parsed, first, last):
    """A calendar holds dates: an event that repeats more often than once a day is refused, and so is
    a file whose events would repeat more than MAX_OCCURRENCES times, before anything is expanded
    (an RRULE every second is millions of occurrences over the window)."""
    total = 0
    for event in parsed.walk("VEVENT"):
        rules = _as_list(event.get("RRULE"))
        total += 1 + sum(len(getattr(dates, "dts", [])) for dates in _as_list(event.get("RDATE")))
        for rule in rules:
            frequency = (rule.get("FREQ") or [""])[0]
            if frequency in SUB_DAILY or any(rule.get(part) for part in ("BYHOUR", "BYMINUTE", "BYSECOND")):
                summary = " ".join(str(event.get("SUMMARY", "")).split())[:60]
                raise _refuse(f"The event {summary!r} repeats more often than once a day (RRULE "
                              f"{rule.to_ical().decode(errors='replace')[:80]}): a calendar holds dates.")
            total += _most_occurrences(rule, first, last)
    if total > MAX_OCCURRENCES:
        raise _refuse(f"The file's events may repeat {total} times from {first} to {last}; at most "
                      f"{MAX_OCCURRENCES}.")


def dates_from_ics(data, today=None):
    """[{"date", "label"}] of the events in ``data`` (bytes or text) within ``ics_window``; raises
    ValidationError on {"file": ...} with the reason for a file that is refused."""
    # Imported here, not at the top: every process imports the definitions, few read a file.
    import icalendar
    import recurring_ical_events

    limit = settings.JOBS_CALENDAR_ICS_MAX_BYTES
    if isinstance(data, str):
        data = data.encode()
    if len(data) > limit:
        raise _refuse(f"The file is {len(data)} bytes; at most {limit} (JOBS_CALENDAR_ICS_MAX_BYTES).")
    if b"\x00" in data:
        raise _refuse("Not an iCalendar file: it holds NUL bytes.")
    try:
        parsed = icalendar.Calendar.from_ical(data)
    except Exception as exc:  # icalendar raises ValueError and its own kinds for every way a file is broken
        raise _refuse(f"Not an iCalendar (ICS) file: {str(exc)[:200]}") from None
    if parsed.name != "VCALENDAR":
        raise _refuse("Not an iCalendar (ICS) file: it does not start with BEGIN:VCALENDAR.")
    first, last = ics_window(today or datetime.now(UTC).date())
    found, touched = {}, 0
    try:
        _check_rules(parsed, first, last)
        for event in recurring_ical_events.of(parsed).between(first, last + timedelta(days=1)):
            days = _days_of(event, first, last)
            touched += len(days)
            if touched > MAX_DAYS_TOUCHED:
                raise _refuse(f"The file's events cover more than {MAX_DAYS_TOUCHED} days from {first} to {last} "
                              "(several-day events counted for each of their days).")
            label = " ".join(str(event.get("SUMMARY", "")).split())[:MAX_LABEL]
            for day in days:
                if first <= day <= last:
                    known = found.get(day)
                    found[day] = label if not known or known == label else f"{known}; {label}"[:MAX_LABEL]
            if len(found) > MAX_DATES:
                raise _refuse(f"The file holds more than {MAX_DATES} dates from {first} to {last}.")
    except ValidationError:
        raise
    except Exception as exc:  # a broken DTSTART, RRULE...: the libraries raise many kinds
        raise _refuse(f"The file's events cannot be read: {str(exc)[:200]}") from None
    return [{"date": day.isoformat(), "label": found[day]} for day in sorted(found)]


def jobs_using(name):
    """The jobs (not locked) whose ``calendars`` name ``name``: few, read in Python, since SQLite
    has no JSON containment."""
    return [job for job in Job.objects.exclude(calendars=[]).only("pk", "name", "calendars")
            if name in job.calendars]


def replan_jobs_using(names, now):
    """After a change of the calendars ``names``: each enabled job that uses one moves its next slot
    to its first open slot from the same place (a due slot from that slot, else from ``now``).
    Runs in the change's transaction, rows locked, so a scheduler's tick that holds a job is
    waited for, and one that comes after sees the change."""
    day_rules_cache.refresh(force=True)
    names, moved = set(names), []
    candidates = [job.pk for job in Job.objects.exclude(calendars=[]).only("pk", "calendars")
                  if names & set(job.calendars)]
    jobs = (Job.objects.select_for_update(of=("self",)).filter(pk__in=candidates, enabled=True, next_run_at__isnull=False)
            .select_related("crontab", "interval", "clocked"))
    for job in jobs:
        base = job.next_run_at - ONE_MICROSECOND if job.next_run_at <= now else now
        job.next_run_at = job.slot_after(base)
        moved.append(job)
    Job.objects.bulk_update(moved, ["next_run_at"], batch_size=1000)
    return moved
