"""On-time reports: for a job (or every visible job of a tag or a group) over the last N days, the
slots its schedule expected, how many had a run, started within the start deadline and finished
within the SLA, how many were missed or skipped (and why), and the p50 and p95 durations with their
trend against the N days before.

Every figure but the expected slots is read from the per-day counts the run ends are folded into
(``JobDayFigures``, ``lifecycle.days``), never from the runs: a report reads at most a row per day
and job. Only scheduled runs count there: a manual run, a retry's new run or a backfill is in
none of the slot figures (its duration is). The expected slots come from the schedules themselves:
each stretch of time since the job was created counted with the schedule in force then (cron,
interval or one-time, read back from the audit trail: ``schedule_history``), day by day, up to now,
outside the times the audit trail says the job was paused or disabled (as the slot report counts
them), on the days its calendars and business days leave open. A slot of the scheduler's grace
before now with no run yet is ``due``, not missed. A day whose wall clock does not jump is counted
from the cron fields alone, a part of one too (its wall times of day); a day with a DST change walks
its slots (``Job.slots_between``).
"""

import bisect
import csv
import functools
import io
import math
from collections import defaultdict
from datetime import UTC, datetime, time, timedelta

from croniter import croniter
from django.conf import settings
from django.utils import timezone

from ..lifecycle import days as day_counts
from ..models import ACTIVE_STATUSES, JobRun, RunTrigger, ScheduleType
from ..timing.schedules import wall_instant
from . import schedule_history
from .slot_report import EnabledTimeline

WINDOWS = (7, 30, 90)
MAX_DAYS = 90
MAX_JOBS = 2000  # jobs a tag's or a group's report adds up
MAX_SLOTS_A_DAY = 86400  # an every-second interval


class ReportTooLarge(Exception):
    """A report that would walk more slots one by one than JOBS_REPORT_MAX_SLOTS allows."""


class SlotBudget:
    """The slots one report may walk one by one (a croniter step each: the days with a clock
    change), JOBS_REPORT_MAX_SLOTS in all; the other days are counted from the cron fields."""

    def __init__(self, days):
        self.left, self.days = settings.JOBS_REPORT_MAX_SLOTS, days

    def walk(self, job, lo, hi):
        slots = job.slots_between(lo, hi, min(MAX_SLOTS_A_DAY, self.left))
        if len(slots) > self.left:
            raise ReportTooLarge(
                f"narrow the report: over {self.days} days its jobs' schedules have more than "
                f"{settings.JOBS_REPORT_MAX_SLOTS} slots on days with a clock change, walked one by one "
                "(JOBS_REPORT_MAX_SLOTS): ask for fewer days or fewer jobs.")
        self.left -= len(slots)
        return len(slots)


def job_report(job, days, now=None):
    return _report([job], days, now or timezone.now()) | {"job": job.pk, "name": job.name}


def jobs_report(jobs, days, now=None):
    """The report of several jobs together (a tag's, a group's): their figures added day by day."""
    return _report(list(jobs), days, now or timezone.now())


def _report(jobs, days, now):
    today = max((now.astimezone(day_counts.zone_of(_zone(job))).date() for job in jobs), default=now.date())
    first = today - timedelta(days=days - 1)
    before = first - timedelta(days=days)
    counts = day_counts.read_days([job.pk for job in jobs], before, today)
    expected, recent = defaultdict(int), 0
    grace = now - timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + settings.JOBS_TICK_SECONDS * 5)
    changes, timelines = schedule_history.changes_of([job.pk for job in jobs]), EnabledTimeline.of_jobs(jobs)
    budget = SlotBudget(days)
    for job in jobs:
        history = schedule_history.periods(job, changes.get(job.pk, []))
        for day, number in expected_by_day(job, first, today, now, history, timelines[job.pk], budget).items():
            expected[day] += number
        recent += sum(expected_by_day(job, first, today, now, history, timelines[job.pk], budget, grace).values())
    scheduled = JobRun.objects.filter(job__in=jobs, trigger=RunTrigger.SCHEDULE)
    in_flight = scheduled.filter(status__in=ACTIVE_STATUSES,
                                 scheduled_for__gte=datetime.combine(first, time(), UTC) - timedelta(days=1)).count()
    # The slots of the scheduler's grace before now with no run yet: due, not missed.
    due = max(0, recent - scheduled.filter(scheduled_for__gte=grace).count()) if recent else 0
    window = {measure: number for (day, measure), number in _sum_days(counts, first, today).items()}
    slots = window.get(day_counts.SLOTS, 0)
    skipped = {m[len(day_counts.SKIPPED):]: n for m, n in window.items() if m.startswith(day_counts.SKIPPED)}
    slots_expected = sum(expected.values())
    p50, p95, timed = _percentiles(window)
    _, previous_p95, _ = _percentiles({m: n for (d, m), n in _sum_days(counts, before, first - timedelta(days=1)).items()})
    return {
        "days": days, "from": first.isoformat(), "to": today.isoformat(),
        "slots_expected": slots_expected,
        "slots_with_run": slots,
        "in_flight": in_flight,
        "due": due,
        "missed": max(0, slots_expected - slots - in_flight - due),
        "started_on_time": window.get(day_counts.ON_TIME, 0),
        "finished_within_sla": window.get(day_counts.WITHIN_SLA, 0),
        "skipped": sum(skipped.values()),
        "skipped_by_reason": dict(sorted(skipped.items(), key=lambda item: -item[1])),
        "outcomes": {status: window.get(status, 0) for status in ("succeeded", "failed", "timed_out", "lost",
                                                                  "cancelled", "skipped")},
        "duration": {"runs": timed, "p50_seconds": p50, "p95_seconds": p95, "previous_p95_seconds": previous_p95,
                     "trend": _trend(p95, previous_p95)},
        "daily": [_day(day, expected.get(day, 0), counts.get(day, {}))
                  for day in (first + timedelta(days=n) for n in range(days))],
    }


def _zone(job):
    return job.crontab.timezone if job.schedule_type == ScheduleType.CRON else None


def _sum_days(counts, first, last):
    summed = defaultdict(int)
    for day, measures in counts.items():
        if first <= day <= last:
            for measure, number in measures.items():
                summed[(None, measure)] += number
    return summed


def _percentiles(measures):
    """p50 and p95 (seconds, each the middle of its histogram bucket) and how many durations."""
    buckets = sorted((int(m[len(day_counts.DURATION):]), n) for m, n in measures.items()
                     if m.startswith(day_counts.DURATION))
    total = sum(n for _, n in buckets)
    if not total:
        return None, None, 0

    def at(share):
        rank, seen = math.ceil(share * total), 0
        for bucket, number in buckets:
            seen += number
            if seen >= rank:
                return round(day_counts.bucket_seconds(bucket), 6)

    return at(0.5), at(0.95), total


def _trend(now, before):
    if now is None or before is None or before == 0:
        return None
    return round((now - before) / before, 3)


def _day(day, expected, measures):
    return {
        "day": day.isoformat(), "expected": expected, "with_run": measures.get(day_counts.SLOTS, 0),
        "on_time": measures.get(day_counts.ON_TIME, 0), "within_sla": measures.get(day_counts.WITHIN_SLA, 0),
        "skipped": sum(n for m, n in measures.items() if m.startswith(day_counts.SKIPPED)),
        "failed": sum(measures.get(status, 0) for status in ("failed", "timed_out", "lost")),
    }


# --- the slots a schedule expected


def expected_by_day(job, first, last, now, history=None, timeline=None, budget=None, since=None):
    """{day: slots} of the job's schedules on the days [first, last] of its zone, up to ``now`` (and
    from ``since`` when given), each stretch of time counted with the schedule in force then (read
    back from the audit trail: ``schedule_history``), while the job was enabled, on the days its
    calendars and business days leave open. ``history`` (its ``Period``s) and ``timeline``
    (``EnabledTimeline``): read by the caller for many jobs at once, else here; ``budget``: the
    report's ``SlotBudget`` (ReportTooLarge past it)."""
    budget = budget or SlotBudget(None)
    if timeline is None:
        history, timeline = schedule_history.periods(job), EnabledTimeline(job)
    zone = day_counts.zone_of(_zone(job))
    start = wall_instant(datetime.combine(first, time()), zone)
    start = max(start, since) if since else start
    end = min(wall_instant(datetime.combine(last + timedelta(days=1), time()), zone), now)
    rules = job.day_rules()
    found = defaultdict(int)
    for period in history:
        until = end if period.until is None else min(end, period.until)
        if period.job.schedule_type == ScheduleType.ONCE:
            _count_once(period, timeline, start, until, rules, found)
            continue
        zone = day_counts.zone_of(_zone(period.job))
        for span_start, hi in timeline.spans(period.since, until):
            grid = _interval_grid(period, span_start)
            lo = max(span_start, start)
            day = lo.astimezone(zone).date()
            while lo < hi:
                next_day = wall_instant(datetime.combine(day + timedelta(days=1), time()), zone)
                part_end = min(hi, next_day)
                if rules is None or not rules.why_closed(day):
                    found[day] += _slots_in(period.job, zone, day, lo, part_end, part_end - lo == timedelta(days=1),
                                            budget, grid)
                lo, day = part_end, day + timedelta(days=1)
    return found


def _count_once(period, timeline, start, end, rules, found):
    """A one-time schedule's slot, on its day, when it fell in [start, end) (``end``: the schedule's
    end, if before the report's) and while the schedule was in force: at its moment if the job was
    enabled then, or later (run late, as the scheduler does with a moment already past when the
    schedule was saved) if the job was enabled at all after."""
    at = period.job.clocked.clocked_time + period.job.spread_offset
    if not start <= at < end:
        return
    if at >= period.since and timeline.off_reason(at):
        return
    if at < period.since and not timeline.spans(period.since, end):
        return
    day = at.astimezone(UTC).date()
    if rules is None or not rules.why_closed(day):
        found[day] += 1


def _interval_grid(period, span_start):
    """(the first slot, every seconds) of an interval schedule enabled from ``span_start``: its grid
    restarts there (an edit or a resume), the first slot one interval (and its spread) later; the
    current schedule's grid is the job's ``next_run_at``. None for any other schedule."""
    job = period.job
    if job.schedule_type != ScheduleType.INTERVAL:
        return None
    every = job.every_seconds
    if period.current and job.next_run_at:
        anchor = job.next_run_at
        return anchor + timedelta(seconds=every * (math.floor((span_start - anchor).total_seconds() / every) + 1)), every
    return span_start + job.spread_offset + timedelta(seconds=every), every


def _slots_in(job, zone, day, lo, hi, whole, budget, grid=None):
    if job.schedule_type == ScheduleType.CRON:
        if whole:
            return cron_slots_on(job.cron_expression, day)
        counted = _cron_slots_between(job, zone, lo, hi)
        return counted if counted is not None else budget.walk(job, lo, hi)
    if job.schedule_type == ScheduleType.INTERVAL:
        anchor, every = grid
        first = max(anchor, anchor + timedelta(seconds=every * math.ceil((lo - anchor).total_seconds() / every)))
        return max(0, math.ceil((hi - first).total_seconds() / every))
    return 0


def _cron_slots_between(job, zone, lo, hi):
    """The job's slots in [lo, hi) (a part of one day) counted from its cron fields, as wall times of
    day moved by its spread; None when a day they fall on has a clock change (then they are walked).
    Walking a part of a day is a croniter step a slot: 1,440 for an every-minute job."""
    offset = job.spread_offset
    lo, hi, total = lo - offset, hi - offset, 0
    day = lo.astimezone(zone).date()
    while lo < hi:
        start = wall_instant(datetime.combine(day, time()), zone)
        end = wall_instant(datetime.combine(day + timedelta(days=1), time()), zone)
        if end - start != timedelta(days=1):
            return None
        part_end = min(hi, end)
        total += cron_slots_within(job.cron_expression, day, (lo - start).total_seconds(),
                                   (part_end - start).total_seconds())
        lo, day = part_end, day + timedelta(days=1)
    return total


def cron_slots_within(expression, day, lo_seconds, hi_seconds):
    """The slots of ``expression`` on ``day`` (a day without a clock change) whose wall time, in
    seconds since midnight, is in [lo_seconds, hi_seconds)."""
    if not cron_slots_on(expression, day):
        return 0
    minutes = _minutes_of_day(expression)
    return (bisect.bisect_left(minutes, math.ceil(hi_seconds / 60))
            - bisect.bisect_left(minutes, math.ceil(lo_seconds / 60)))


@functools.lru_cache(maxsize=4096)
def _minutes_of_day(expression):
    """The minutes of a day (0 to 1439) the expression's minute and hour fields name, in order."""
    minutes, hours, *_ = croniter(expression).expanded
    minutes = range(60) if minutes == ["*"] else minutes
    hours = range(24) if hours == ["*"] else hours
    return sorted(hour * 60 + minute for hour in hours for minute in minutes)


@functools.lru_cache(maxsize=65536)
def cron_slots_on(expression, day):
    """The slots of ``expression`` on ``day``, a day whose wall clock runs 24 hours without a jump:
    its minutes times its hours, when the day matches its day, month and weekday fields."""
    minutes, hours, *_ = croniter(expression).expanded
    first_minute = 0 if minutes == ["*"] else minutes[0]
    first_hour = 0 if hours == ["*"] else hours[0]
    day_fields = " ".join(expression.split()[2:5])
    if not croniter.match(f"{first_minute} {first_hour} {day_fields}",
                          datetime.combine(day, time(first_hour, first_minute))):
        return 0
    return (60 if minutes == ["*"] else len(minutes)) * (24 if hours == ["*"] else len(hours))


def as_csv(report):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["day", "expected", "with_run", "on_time", "within_sla", "skipped", "failed"])
    for row in report["daily"]:
        writer.writerow([row[key] for key in ("day", "expected", "with_run", "on_time", "within_sla", "skipped",
                                              "failed")])
    return out.getvalue()


def window_days(value):
    """The report's window from a query's ``days`` (1 to MAX_DAYS), or a ValueError saying why."""
    try:
        days = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"days is a whole number of days from 1 to {MAX_DAYS}.") from None
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"days is from 1 to {MAX_DAYS}, not {days}.")
    return days

