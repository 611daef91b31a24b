"""The load forecast: how many runs fall due in each minute of the next hours, where the peaks are,
which jobs make them, and how many worker slots a peak needs against the slots seen now.

A million jobs cannot be walked slot by slot in Python in the time of a request, and they need not
be: jobs on the same schedule row (and the same settings that shape slots, ``SHAPE_FIELDS``) have
the same slots, moved by their offsets. So the jobs are counted in SQL by group and each group's
slots are computed once:

- cron: by (crontab, shape, offset minute); the group's times are those of a stand-in job without
  spread (``Job.slots_between`` around DST changes, so whatever ``slot_after`` honours is included;
  the cron fields elsewhere, ``jobs.timing.many_slots``), then each offset minute moves them. A cron slot falls on a whole minute of its zone's offset, so a
  time plus an offset of ``o`` seconds falls ``o // 60`` minutes later.
- interval: by (interval, next slot to the minute or second); each group is arithmetic on its grid.
- once: by the minute of the next slot (with the intervals, in one pass).

Offsets come from the job's name (``jobs.timing.spread``), kept in ``Job.spread_offset_seconds`` so
that one query counts the cron jobs by schedule row and offset minute, and the jobs of a peak's
group are found by the index of the enabled cron jobs by schedule row and offset (job_cron_offset_idx).
"""

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, timedelta

from django.core.exceptions import ValidationError
from django.db.models import Case, Count, F, Q, Sum, When
from django.db.models.functions import TruncMinute, TruncSecond
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule

from ..models import Job, JobAttempt, JobHourCounts, ScheduleType, WindowMode
from ..models.window import window_book
from ..timing import many_slots

MAX_HOURS = 168
PEAKS = 10
JOBS_LISTED = 20
# The fields besides the schedule row that decide where a job's slots fall: jobs alike in them share
# their slots. A setting that changes slot_after (a DST policy, calendars) adds its field here.
DAY_RULE_FIELDS = ("calendars", "business_days", "business_day_of_month")
SHAPE_FIELDS = ("dst_skipped", "dst_repeated", *DAY_RULE_FIELDS)
# Their values with which a job's slots are the cron fields' wall times (DST changes aside, which are
# asked of slot_after): such groups have their slots computed in bulk (jobs.timing.many_slots).
PLAIN_SHAPE = ("shift", "first", (), False, None)
DURATION_HOURS = 24  # how far back the jobs' durations are averaged (the hourly rollups, JobHourCounts)
WORKERS_SEEN_MINUTES = 10  # a worker slot is seen when it started or heartbeat an attempt this recently
UNKNOWN_DURATION_SECONDS = 1.0  # a job on a schedule with no timed run yet
MAX_PEAKS = 50
MAX_LISTED = 200


def _bounded(params, name, default, low, high):
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or not low <= value <= high:
        raise ValidationError({name: f"Must be a whole number from {low} to {high}."})
    return value


def parameters(params):
    """(hours, peaks, jobs listed per peak) from a request's ``params``; a ValidationError naming
    the parameter and its rule."""
    return (_bounded(params, "hours", 24, 1, MAX_HOURS), _bounded(params, "peaks", PEAKS, 1, MAX_PEAKS),
            _bounded(params, "jobs", JOBS_LISTED, 0, MAX_LISTED))


@dataclass
class Group:
    """Jobs whose slots fall in the same minutes: ``minutes`` are their indexes in the window."""

    kind: str  # "cron", "interval" or "once"
    key: tuple  # what picks the group's jobs out (see jobs_of)
    jobs: int
    minutes: list = field(default_factory=list)


def _by_offset_minute(jobs):
    """[((crontab id, *shape, offset minute), count)] of the cron jobs of ``jobs``: one query (it
    reads each job's shape, so every cron job's row: no index of the jobs table holds them all)."""
    return [(tuple(_hashable(value) for value in row[:-1]), row[-1]) for row in
            jobs.filter(schedule_type=ScheduleType.CRON)
            .annotate(offset_minute=F("spread_offset_seconds") / 60)
            .values_list("crontab_id", *SHAPE_FIELDS, "offset_minute").annotate(n=Count("*")).order_by()]


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value  # a job's calendars, a JSON list


def _as_fields(names, values):
    """A group's key values as the job's fields again (its calendars a list)."""
    return {name: list(value) if isinstance(value, tuple) else value for name, value in zip(names, values, strict=True)}


def _closed(rules, start, minute):
    """Whether the day rules close the (UTC) day of an interval slot in ``minute`` of the window."""
    return rules is not None and bool(rules.why_closed((start + timedelta(minutes=minute)).date()))


def cron_groups(jobs, start, end):
    groups, times = [], {}
    by_offset = _by_offset_minute(jobs)
    crontabs = CrontabSchedule.objects.in_bulk({key[0] for key, _ in by_offset})
    # From early enough that the slots the longest offset moves into the window are in.
    since = start - timedelta(minutes=max((key[-1] for key, _ in by_offset), default=0) + 1)
    for key, count in by_offset:
        crontab_id, *shape, offset_minute = key
        if (crontab_id, *shape) not in times:
            times[(crontab_id, *shape)] = [_minute(slot, start) for slot in
                                           _group_slots(crontabs[crontab_id], shape, since, end)]
        span = _span(start, end)
        minutes = [m + offset_minute for m in times[(crontab_id, *shape)]]
        groups.append(Group("cron", key, count, [m for m in minutes if 0 <= m < span]))
    return groups


def _group_slots(crontab, shape, start, end):
    """The slots in [start, end) of the jobs on ``crontab`` with ``shape`` and no spread: those of a
    stand-in job; on a plain shape, computed in bulk away from DST changes (``many_slots``)."""
    stand_in = Job(schedule_type=ScheduleType.CRON, crontab=crontab, spread=0,
                   **_as_fields(SHAPE_FIELDS, shape))

    def exact(a, b):
        return stand_in.slots_between(a, b, 10**7)

    if tuple(shape) != PLAIN_SHAPE:
        return exact(start, end)
    return many_slots.cron_slots_between(stand_in.cron_expression, str(crontab.timezone), start, end, exact)


def timed_groups(jobs, start, end):
    """The interval and one-time jobs, in one pass over them. Intervals by interval and next slot:
    to the minute for intervals of whole minutes (a slot's minute is then the next slot's minute plus
    whole steps), else to the second (a slot's minute is that of its second: adding whole seconds
    to a fraction crosses no minute). One-time jobs by the minute of their slot."""
    groups, span = [], _span(start, end)
    every = {row.pk: row.every * PERIOD_SECONDS[row.period] for row in IntervalSchedule.objects.all()}
    whole = [pk for pk, seconds in every.items() if seconds % 60 == 0]
    interval = Q(schedule_type=ScheduleType.INTERVAL, next_run_at__isnull=False)
    rows = (jobs.filter(interval | Q(schedule_type=ScheduleType.ONCE, next_run_at__gte=start, next_run_at__lt=end))
            .annotate(next_at=Case(When(interval & ~Q(interval_id__in=whole), then=TruncSecond("next_run_at", tzinfo=UTC)),
                                   default=TruncMinute("next_run_at", tzinfo=UTC)))
            .values_list("schedule_type", "interval_id", *DAY_RULE_FIELDS, "next_at").annotate(n=Count("*")).order_by())
    for schedule_type, interval_id, *day_rules, next_at, count in rows:
        next_at = next_at if timezone.is_aware(next_at) else next_at.replace(tzinfo=UTC)  # a Case drops Trunc's zone
        if schedule_type == ScheduleType.ONCE:
            groups.append(Group("once", (_minute(next_at, start),), count, [_minute(next_at, start)]))
            continue
        seconds = every[interval_id]
        first = next_at
        if first < start:  # overdue: the grid's first point in the window
            first += timedelta(seconds=seconds * math.ceil((start - first).total_seconds() / seconds))
        offset = (first - start).total_seconds()
        if seconds % 60 == 0:
            minutes = list(range(int(offset // 60), span, int(seconds // 60)))
        else:
            minutes = [int((offset + k * seconds) // 60) for k in range(math.ceil((span * 60 - offset) / seconds))]
        # An interval's days are UTC days (Job.day_zone): the day rules drop the slots of closed ones.
        rules = Job(**_as_fields(DAY_RULE_FIELDS, day_rules)).day_rules()
        minutes = [m for m in minutes if not _closed(rules, start, m)]
        groups.append(Group("interval", (interval_id, next_at, seconds % 60 == 0,
                                         *(_hashable(value) for value in day_rules)), count, minutes))
    return groups


PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}


def _minute(moment, start):
    return int((moment - start).total_seconds() // 60)


def _span(start, end):
    return int((end - start).total_seconds() // 60)


def jobs_of(jobs, group, start, limit):
    """Up to ``limit`` of the jobs of ``group``: [(id, name)]."""
    if group.kind == "cron":
        crontab_id, *shape, offset_minute = group.key
        chosen = jobs.filter(schedule_type=ScheduleType.CRON, crontab_id=crontab_id,
                             spread_offset_seconds__gte=offset_minute * 60,
                             spread_offset_seconds__lt=(offset_minute + 1) * 60,
                             **_as_fields(SHAPE_FIELDS, shape))
    elif group.kind == "interval":
        interval_id, next_at, to_the_minute, *day_rules = group.key
        chosen = jobs.filter(schedule_type=ScheduleType.INTERVAL, interval_id=interval_id, next_run_at__gte=next_at,
                             next_run_at__lt=next_at + timedelta(seconds=60 if to_the_minute else 1),
                             **_as_fields(DAY_RULE_FIELDS, day_rules))
    else:
        at = start + timedelta(minutes=group.key[0])
        chosen = jobs.filter(schedule_type=ScheduleType.ONCE, next_run_at__gte=at,
                             next_run_at__lt=at + timedelta(minutes=1))
    return list(chosen.order_by("name").values_list("id", "name")[:limit])


def mean_durations(jobs, groups, now):
    """{(kind, schedule row id): mean seconds} of the runs of ``jobs`` on the schedule rows of
    ``groups`` that ended with a duration in the last DURATION_HOURS (the hourly rollups)."""
    wanted = defaultdict(set)
    for group in groups:
        if group.kind != "once":
            wanted[group.kind].add(group.key[0])
    found = {}
    since = now - timedelta(hours=DURATION_HOURS)
    for kind, row_field in (("cron", "crontab_id"), ("interval", "interval_id")):
        if not wanted[kind]:
            continue
        counts = (JobHourCounts.objects.filter(hour__gte=since, job__in=jobs.filter(**{f"{row_field}__in": wanted[kind]}))
                  .values_list(f"job__{row_field}").annotate(seconds=Sum("seconds"), timed=Sum("timed")).order_by())
        for row_id, seconds, timed in counts:
            if timed:
                found[(kind, row_id)] = seconds / timed
    return found


def worker_slots_seen(now):
    """The worker processes that started an attempt in the last WORKERS_SEEN_MINUTES or run one now:
    (host, pid) pairs of the attempts (the overview's recent workers, counted by process)."""
    return len(JobAttempt.seen_since(now - timedelta(minutes=WORKERS_SEEN_MINUTES), "worker", "pid"))


def forecast(jobs, now, hours=24, peaks=PEAKS, listed=JOBS_LISTED, workers_seen=None):
    """The forecast of ``jobs`` (a queryset: the caller's visible jobs) for ``hours`` from the minute
    of ``now``. ``workers_seen``: the worker slots seen now, or None to leave them out."""
    start = now.replace(second=0, microsecond=0)
    end = start + timedelta(hours=hours)
    jobs = jobs.filter(enabled=True)
    groups = [*cron_groups(jobs, start, end), *timed_groups(jobs, start, end)]
    per_minute = [0] * _span(start, end)
    for group in groups:
        for minute in group.minutes:
            per_minute[minute] += group.jobs
    held = held_by_windows(jobs, start, end)
    for minute, runs in held.items():
        per_minute[minute] = max(0, per_minute[minute] - runs)
    average = sum(per_minute) / len(per_minute) if per_minute else 0
    level = math.ceil(average)
    # A peak is a minute busier than the average: a flat load has none to spread.
    top = sorted((m for m in range(len(per_minute)) if per_minute[m] > average),
                 key=lambda m: (-per_minute[m], m))[:peaks]
    # {peak minute: [(group, its runs in the minute)]}: an interval under a minute runs more than once in one.
    in_peak = {m: [] for m in top}
    for group in groups:
        for minute, runs in Counter(m for m in group.minutes if m in in_peak).items():
            in_peak[minute].append((group, runs))
    durations = mean_durations(jobs, [g for members in in_peak.values() for g, _ in members], now)
    shown_peaks = []
    for minute in top:
        members = sorted(in_peak[minute], key=lambda member: -member[0].jobs)
        listed_jobs = []
        for group, _ in members:
            if len(listed_jobs) >= listed:
                break
            listed_jobs += jobs_of(jobs, group, start, listed - len(listed_jobs))
        busy = sum(g.jobs * runs * min(60.0, durations.get((g.kind, g.key[0]), UNKNOWN_DURATION_SECONDS))
                   for g, runs in members)
        count = sum(g.jobs for g, _ in members)
        shown_peaks.append({
            "minute": start + timedelta(minutes=minute),
            "runs": per_minute[minute],
            "worker_slots_needed": math.ceil(busy / 60),
            "jobs": [{"id": job_id, "name": name} for job_id, name in listed_jobs],
            "jobs_total": count,
            "jobs_more": count - len(listed_jobs),
            "suggestion": suggest(per_minute, minute, level, count),
        })
    return {
        "start": start,
        "end": end,
        "hours": hours,
        "total_runs": sum(per_minute),
        "per_minute": per_minute,
        "level": level,
        "peaks": shown_peaks,
        "worker_slots_seen": workers_seen,
        "groups": len(groups),
        "held_runs": sum(held.values()),
    }


HELD_SLOTS_PER_JOB = 10_000  # a job's slots inside hold windows counted, at most (a day of every 7 s is 12,343)


def held_by_windows(jobs, start, end):
    """{minute index: slots} of ``jobs``' slots in [start, end) that ``hold`` maintenance windows
    cover: the scheduler makes them skipped ("maintenance"), so they run nothing. Asked of the jobs
    the windows reach, slot by slot (a window reaches a few jobs; the forecast's groups, thousands)."""
    reached = window_book.reaching(WindowMode.HOLD, force=True)  # a window saved a moment ago counts
    held = Counter()
    if not reached:
        return held
    for job in jobs.filter(pk__in=list(reached)).select_related("crontab", "interval", "clocked"):
        slots = set()
        for window in reached[job.pk]:
            for span_start, span_end in window.spans_between(start, end):
                try:
                    slots.update(job.slots_between(max(start, span_start), min(end, span_end), HELD_SLOTS_PER_JOB))
                except (OverflowError, ValueError):  # no slot to come
                    continue
        held.update(_minute(slot, start) for slot in slots if start <= slot < end)
    return held


def suggest(per_minute, minute, level, jobs):
    """A spread for the jobs of a peak minute: over as many minutes as it takes to bring the minute
    down to the average load (``level``), at most the quiet stretch after it (no later peak of the
    same size) and an hour. None when the minute is already at the level."""
    runs = per_minute[minute]
    if runs <= max(level, 1):
        return None
    wanted = math.ceil(runs / max(level, 1))
    width = 1
    while width < min(wanted, 60) and minute + width < len(per_minute) and per_minute[minute + width] < runs:
        width += 1
    if width <= 1:
        return None
    return {"spread_seconds": width * 60, "over_minutes": width, "jobs": jobs,
            "runs_per_minute_after": math.ceil(runs / width)}


def jobs_due_in_minute(jobs, minute, limit):
    """The ids of up to ``limit`` of ``jobs`` (enabled) with a slot in the minute that begins at
    ``minute``: the jobs of a peak, all of them, for the page's "spread every job of this minute"."""
    start = minute.replace(second=0, microsecond=0)
    end = start + timedelta(minutes=1)
    jobs = jobs.filter(enabled=True)
    ids = []
    for group in [*cron_groups(jobs, start, end), *timed_groups(jobs, start, end)]:
        if 0 in group.minutes and len(ids) < limit:
            ids += [job_id for job_id, _ in jobs_of(jobs, group, start, limit - len(ids))]
    return ids
