"""Business calendars' date math: on which local dates a job may run.

A job's day rules are the dates of its calendars (holidays and closures), whether it runs on
business days only (Monday to Friday, less those dates), and which business day of the month it
runs on (1 the first, -1 the last, -2 the one before...). A slot's date is its date in the job's
own timezone (the slot's local date), so a 00:30 slot in Berlin on 25 December is on the 25th even
though it is 23:30 on the 24th in UTC.

``first_open_slot`` wraps any "first slot strictly after" function of a schedule: a slot on a closed
date is passed over by jumping to the next open date's midnight, not by walking the slots of the
closed dates, and the search looks no further than ``LOOKAHEAD_DAYS``: a job whose calendars close
every date has no next slot rather than a search without end.
"""

import calendar as month_calendar
from datetime import UTC, datetime, time, timedelta

LOOKAHEAD_DAYS = 5 * 366  # five years: past this, "no next slot"
MAX_BUSINESS_DAYS_IN_A_MONTH = 23  # 31 days with 23 weekdays: the range of business_day_of_month
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ONE_MICROSECOND = timedelta(microseconds=1)


def ordinal(n):
    """1 → "1st", -1 → "last", -2 → "2nd last"."""
    if n == -1:
        return "last"
    if n < 0:
        return f"{ordinal(-n)} last"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def holiday_text(closures):
    """What closes a date, as the slot report says it: "holiday — Christmas Day (calendar de-be)"."""
    return "; ".join(f"holiday — {label} (calendar {name})" if label else f"holiday (calendar {name})"
                     for name, label in closures)


class DayRules:
    """A job's day rules. ``closures(day)`` gives the (calendar name, label) pairs closing ``day``
    (its calendars' dates); ``business_days`` keeps weekdays only; ``nth`` (business_day_of_month)
    keeps one business day per month. Answers are remembered per month: build one per job's rules
    and keep it while the calendars are unchanged."""

    def __init__(self, closures, business_days=False, nth=None):
        self._closures, self.business_days, self.nth = closures, business_days, nth
        self._months, self._days = {}, {}

    def closures(self, day):
        """The (calendar name, label) pairs closing ``day``, remembered (a country's holidays are
        slow to ask, and a frequent schedule asks of the same date many times)."""
        found = self._days.get(day)
        if found is None:
            found = self._days[day] = self._closures(day)
        return found

    def is_business_day(self, day):
        return day.weekday() < 5 and not self.closures(day)

    def chosen_day(self, year, month):
        """The nth business day of the month, or None when the month has fewer business days."""
        key = (year, month)
        if key not in self._months:
            days = month_calendar.monthrange(year, month)[1]
            business = [d for d in (datetime(year, month, n).date() for n in range(1, days + 1))
                        if self.is_business_day(d)]
            index = self.nth - 1 if self.nth > 0 else self.nth
            self._months[key] = business[index] if -len(business) <= index < len(business) else None
        return self._months[key]

    def is_open(self, day):
        if self.nth is not None:
            return self.chosen_day(day.year, day.month) == day
        if self.closures(day):
            return False
        return not self.business_days or day.weekday() < 5

    def why_closed(self, day):
        """Why the job does not run on ``day``, in words; "" when it does."""
        if self.is_open(day):
            return ""
        if found := self.closures(day):
            return holiday_text(found)
        if self.business_days and day.weekday() >= 5:
            return f"not a business day — {WEEKDAYS[day.weekday()]}"
        chosen = self.chosen_day(day.year, day.month)
        month = f"{day:%B %Y}"
        if chosen is None:
            return f"{month} has no {ordinal(self.nth)} business day"
        return f"not the {ordinal(self.nth)} business day of {month} (that is {WEEKDAYS[chosen.weekday()]} {chosen:%Y-%m-%d})"

    def next_open(self, day, last):
        """The first open date after ``day`` up to ``last``, or None."""
        if self.nth is not None:
            year, month = day.year, day.month
            while (year, month) <= (last.year, last.month):
                chosen = self.chosen_day(year, month)
                if chosen is not None and day < chosen <= last:
                    return chosen
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            return None
        day += timedelta(days=1)
        while day <= last:
            if self.is_open(day):
                return day
            day += timedelta(days=1)
        return None


def local_date(instant, zone):
    return instant.astimezone(zone).date()


def day_start(day, zone):
    """The first instant of the local date ``day`` (midnight, or the end of a gap at midnight)."""
    return datetime.combine(day, time.min).replace(tzinfo=zone, fold=0).astimezone(UTC)


def first_open_slot(slot_after, zone, rules, after, lookahead_days=LOOKAHEAD_DAYS):
    """The first slot of ``slot_after`` (a schedule's "first slot strictly after") strictly after
    ``after`` whose local date in ``zone`` is open by ``rules``; None when there is none within
    ``lookahead_days`` of ``after``'s date."""
    last = local_date(after, zone) + timedelta(days=lookahead_days)
    cursor = after
    while True:
        slot = slot_after(cursor)
        if slot is None:
            return None
        day = local_date(slot, zone)
        if day > last:
            return None
        if rules.is_open(day):
            return slot
        following = rules.next_open(day, last)
        if following is None:
            return None
        # Never backwards: a repeated hour around midnight can put the next date's start before the slot.
        cursor = max(day_start(following, zone) - ONE_MICROSECOND, slot)


def open_slots(slot_after, zone, rules, after, end, limit):
    """The open slots strictly after ``after`` and before ``end``, at most ``limit + 1`` of them."""
    found, cursor = [], after
    while len(found) <= limit:
        cursor = first_open_slot(slot_after, zone, rules, cursor)
        if cursor is None or cursor >= end:
            break
        found.append(cursor)
    return found
