"""Every slot accounted for: for a job and a time range, each slot its schedule expected and what
became of it.

- ``ran``: a run exists for the slot (scheduled or backfilled), whatever its status;
- ``skipped``: a run recorded the slot as skipped (overlap policy, start deadline, catch-up
  policy), or no run exists because the job was paused or disabled then (from the audit trail),
  or the slot falls on a date the job's calendars or business days close ("holiday — Christmas
  Day (calendar de-be)", "not a business day — Saturday": ``Job.closed_slots``);
- ``missing``: no run and no explanation. That should never happen, so it is an alert: the
  periodic check (``check_recent``, the task ``jobs.check_slots``) records a ``missed``
  notification for the slot (once per slot and channel). Reading a report writes nothing;
- ``due``: no run yet, but the slot is too recent to call it missing (the scheduler's grace);
- ``upcoming``: in the future.

Slots are computed with the job's *current* schedule; slots before the job was created or before
its schedule last changed are not checked (``checked_from`` says from when they are).
An interval job's run belongs to the slot whose interval it falls in, since editing or resuming
the job moves its grid.
"""

import logging
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from audit import trail
from audit.models import Action, AuditEntry

from .. import kinds
from ..lifecycle import events, limits, pings
from ..models import Job, RunStatus, ScheduleType
from ..timing import dst
from .backfill import check_range, job_runs, runs_by_slot

logger = logging.getLogger(__name__)

CHECK_CHUNK = 500  # jobs read at once by the periodic check
RAN, SKIPPED, MISSING, DUE, UPCOMING = "ran", "skipped", "missing", "due", "upcoming"
MISSING_REASON = "no run and no record of why: an alert is raised by the periodic check"
DUE_REASON = "not dispatched yet (within the scheduler's grace)"
RECURRING = [ScheduleType.CRON, ScheduleType.INTERVAL, ScheduleType.ONCE]
NO_MORE_SLOTS = datetime(9999, 12, 31, tzinfo=UTC)  # slot_check_from of a schedule with no slot left


@dataclass
class Slot:
    at: object
    outcome: str
    reason: str = ""
    run: object = None


@dataclass
class SlotReport:
    start: object
    end: object
    checked_from: object
    slots: list = field(default_factory=list)

    def count(self, outcome):
        return sum(slot.outcome == outcome for slot in self.slots)

    @property
    def missing(self):
        return [slot for slot in self.slots if slot.outcome == MISSING]


# The audit entries that can enable or disable a job (EnabledTimeline._enabled_after), and what is read of them.
ENABLING = AuditEntry.objects.filter(action__in=[Action.PAUSE, Action.RESUME, Action.CREATE, Action.CHANGE])
ENTRY_FIELDS = ("created_at", "action", "changes", "actor_name", "actor_id", "source")


class EnabledTimeline:
    """When the job was paused or disabled, from its audit trail: (since, enabled, why) changes."""

    def __init__(self, job, entries=None):
        """``entries``: the job's audit entries, oldest first, read by the caller for many jobs
        (``of_jobs``); without them they are read when first needed."""
        self.job = job
        self.changes = None
        if entries is not None:
            self._read(entries)

    @classmethod
    def of_jobs(cls, jobs):
        """{job id: its timeline} of many jobs, their entries read in one query."""
        entries = defaultdict(list)
        for entry in ENABLING.filter(job__in=jobs).order_by("created_at", "id").only(*ENTRY_FIELDS, "job_id"):
            entries[entry.job_id].append(entry)
        return {job.pk: cls(job, entries[job.pk]) for job in jobs}

    def _load(self):
        self._read(ENABLING.filter(job=self.job).order_by("created_at", "id").only(*ENTRY_FIELDS))

    def _read(self, entries):
        self.changes = []
        for entry in entries:
            enabled = self._enabled_after(entry)
            if enabled is not None:
                self.changes.append((entry.created_at, enabled, entry))
        self.times = [when for when, _, _ in self.changes]

    @staticmethod
    def _enabled_after(entry):
        if entry.action == Action.PAUSE:
            return False
        if entry.action == Action.RESUME:
            return True
        if entry.action in (Action.CREATE, Action.CHANGE) and "enabled" in (entry.changes or {}):
            return bool(entry.changes["enabled"][1])
        return None

    def off_reason(self, moment):
        """Why the job was not running its schedule at ``moment``, or "" when it was."""
        if self.changes is None:  # read only when a slot has no run: rare
            self._load()
        i = bisect_right(self.times, moment)
        if i:
            _, enabled, entry = self.changes[i - 1]
            if enabled:
                return ""
            state = "paused" if entry.action == Action.PAUSE else "disabled"
            return (f"job {state} by {trail.shown_actor(entry)} ({entry.get_source_display()}) at "
                    f"{entry.created_at:%Y-%m-%d %H:%M:%S} UTC")
        if self.changes:  # before the first recorded change: the state that change left
            _, enabled, entry = self.changes[0]
            was_enabled = not enabled if entry.action in (Action.PAUSE, Action.RESUME) else \
                bool((entry.changes or {}).get("enabled", [True])[0])
            return "" if was_enabled else "job paused or disabled (before its recorded history)"
        return "" if self.job.enabled else "job paused or disabled (no record of since when)"


    def spans(self, start, end):
        """The stretches of [start, end) in which the job was enabled."""
        if start >= end:
            return []
        if self.changes is None:
            self._load()
        spans, since = [], None if self.off_reason(start) else start
        for when, enabled, _ in self.changes:
            if start < when < end:
                if enabled and since is None:
                    since = when
                elif not enabled and since is not None:
                    spans.append((since, when))
                    since = None
        return spans + ([(since, end)] if since is not None else [])
# A change of any of these is a change of the job's slots.
SLOT_CHANGES = Q(changes__has_key="schedule") | Q(changes__has_key="dst_skipped") | Q(changes__has_key="dst_repeated")


def schedule_changes_at(ids):
    """{job id: when its slots last changed} of the jobs ``ids``, in one query."""
    return dict(AuditEntry.objects.filter(SLOT_CHANGES, job_id__in=ids, action=Action.CHANGE)
                .values("job_id").annotate(at=Max("created_at")).values_list("job_id", "at"))


def schedule_changed_at(job):
    return (AuditEntry.objects.filter(SLOT_CHANGES, job=job, action=Action.CHANGE)
            .order_by("-created_at").values_list("created_at", flat=True).first())


def dst_notes(job, start, end):
    """({slot: note}, [(instant, reason)]) of the job's slots a clock change in [start, end) moved,
    doubled or skipped, by its DST policy (``jobs.timing.dst.report_notes``)."""
    if job.schedule_type != ScheduleType.CRON or str(job.crontab.timezone) == "UTC":
        return {}, []
    return dst.report_notes(job.cron_expression, str(job.crontab.timezone), job.dst_skipped, job.dst_repeated,
                            start, end)


def with_note(reason, note):
    return "; ".join(text for text in (reason, note) if text)


def build(job, start, end, now=None, alert=False, known=None, slots_of=None):
    """The report for [start, end); raises ValidationError for a bad or too long range. With
    ``alert`` (the periodic check only: a page, the API or the command line only read), a missing
    slot records a ``missed`` notification (deduplicated per slot).
    ``known``: (schedule changed at, the job's runs from start to end), read by the caller for
    many jobs at once; ``slots_of(job, first, end)``: the job's slots, computed by the caller."""
    now = now or timezone.now()
    changed_at, known_runs = known if known is not None else (schedule_changed_at(job), None)
    since = max(filter(None, [job.created_at, changed_at]))
    report = SlotReport(start=start, end=end, checked_from=max(start, since))
    # A schedule's first slot is strictly after the moment it was saved (Job.first_slot).
    first = max(start, since + timedelta(microseconds=1))
    if first >= end:
        return report
    if slots_of is None:
        slots = check_range(job, first, end, settings.JOBS_SLOT_REPORT_MAX_SLOTS, now=now)
    else:
        slots = slots_of(job, first, end)
    notes, skipped_by_policy = dst_notes(job, first, end)
    # The slots the job's calendars and business days close: shown (unless a run was made for one
    # all the same, before the calendar had the date), never alerted on.
    closed = {} if alert else dict(closed_slots(job, first, end))
    if not slots and not closed:
        report.slots = [Slot(at, SKIPPED, reason) for at, reason in skipped_by_policy]
        return report
    by_slot = runs_by_slot(job, sorted([*slots, *closed]), end, known_runs)
    for at, why in closed.items():
        if at not in by_slot:
            report.slots.append(Slot(at, SKIPPED, why))
    slots = sorted([*slots, *(at for at in closed if at in by_slot)])
    timeline = EnabledTimeline(job)
    grace, due = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + settings.JOBS_TICK_SECONDS * 5), DUE_REASON
    if job.kind in kinds.running_elsewhere():
        # A check-in's slot waits for its ping through the job's grace; then it gets its run, failed
        # if none came (lifecycle.pings.fail_unpinged), so a slot missing past that is missing indeed.
        grace, due = max(grace, job.grace + grace), "waiting for its ping (within the job's grace)"
    for at in slots:
        run = by_slot.get(at)
        if run is not None:
            outcome = SKIPPED if run.status == RunStatus.SKIPPED else RAN
            report.slots.append(Slot(at, outcome, run.reason if outcome == SKIPPED else "", run))
        elif at > now:
            report.slots.append(Slot(at, UPCOMING))
        elif reason := timeline.off_reason(at):
            report.slots.append(Slot(at, SKIPPED, reason))
        elif now - at <= grace:
            report.slots.append(Slot(at, DUE, due))
        else:
            report.slots.append(Slot(at, MISSING, MISSING_REASON))
        if note := notes.get(at):
            report.slots[-1].reason = with_note(report.slots[-1].reason, note)
    # (A slot the DST policy skipped comes after a slot at the same instant: sorted is stable.)
    report.slots.extend(Slot(at, SKIPPED, reason) for at, reason in skipped_by_policy)
    report.slots.sort(key=lambda slot: slot.at)
    if alert and report.missing:
        with transaction.atomic():
            for slot in report.missing:
                events.emit(events.SLOT_MISSED, job=job, slot=slot.at, reason="no run was recorded for this slot")
    return report


def closed_slots(job, first, end):
    limit = settings.JOBS_SLOT_REPORT_MAX_SLOTS
    closed = job.closed_slots(first, end, limit)
    if len(closed) > limit:
        raise ValidationError({"end": f"The range holds more than {limit} slots; make it shorter."})
    return closed


def moment_text(moment, tzname="UTC", seconds=False):
    """A moment in ``tzname`` with UTC beside it: "2026-11-23 00:30 CET (2026-11-22 23:30 UTC)"."""
    form = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    utc = f"{moment.astimezone(UTC):{form}} UTC"
    if tzname == "UTC":
        return utc
    return f"{moment.astimezone(ZoneInfo(tzname)):{form} %Z} ({utc})"


def explain(job, moment, now=None, tzname="UTC"):
    """One line: what became of the job's slot at ``moment`` (or the first slot in the minute
    after it), its times in ``tzname`` with UTC beside them."""
    now = now or timezone.now()

    def text(at, seconds=False):
        return moment_text(at, tzname, seconds)

    if job.schedule_type == ScheduleType.MANUAL:
        return f"{job.name} has no schedule (manual only): nothing was due at {text(moment)}."
    report = build(job, moment, moment + timedelta(minutes=1), now=now)
    if not report.slots:
        following = job.slot_after(moment)
        if moment < report.checked_from:
            return (f"Not checked: {text(moment)} is before the job was created or its schedule "
                    f"last changed ({text(report.checked_from)}).")
        nxt = f"; the next slot after it was {text(following)}" if following else ""
        return f"{job.name} had no slot at {text(moment)}{nxt}."
    return " ".join(explain_slot(slot, text, now) for slot in report.slots if slot.at == report.slots[0].at)


def explain_slot(slot, text, now):
    when = text(slot.at, seconds=True)
    note = f" ({slot.reason})" if slot.reason else ""
    if slot.outcome == RAN and slot.run.reason == pings.NO_PING:
        return f"No ping: run #{slot.run.pk} for {when} of this check-in ended failed, {pings.NO_PING}."
    if slot.outcome == RAN:
        run = slot.run
        waits = limits.waiting_for(run, now) if run.waiting_since is not None else None
        return (f"It ran: run #{run.pk} ({run.get_trigger_display().lower()}) for {when} is {run.status}{note}"
                + (f", {waits}." if waits else "."))
    if slot.outcome == SKIPPED:
        return f"Skipped: the slot at {when} was not run: {slot.reason}."
    if slot.outcome == UPCOMING:
        return f"The slot at {when} has not come yet{note}."
    if slot.outcome == DUE and slot.reason.startswith(DUE_REASON):
        return f"The slot at {when} is due and not dispatched yet."
    if slot.outcome == DUE:
        return f"The slot at {when} is {slot.reason}."
    return f"Missing: nothing was recorded for the slot at {when}; an alert is raised by the periodic check."


def check_recent(now=None, window=None):
    """Look at the recent slots of every enabled recurring job and alert the missing ones: what
    the periodic task ``jobs.check_slots`` does (see JOBS_SLOT_CHECK_SECONDS). Returns
    {"jobs": checked, "missing": slots found missing, "unchecked": jobs with too many slots}.

    A pass costs the slots that fell since the last one, not the number of jobs: each job keeps
    the first slot the check has still to look at (``Job.slot_check_from``), and only the jobs
    whose such slot has passed are read. A job not looked at yet (new, edited, resumed) has none
    and is looked at from the window's start. The window (twice the check's period) bounds how
    far back a pass looks after the check was not running. Many jobs share a cron schedule, so a
    cron schedule's slots are computed once a pass."""
    now = now or timezone.now()
    window = timedelta(seconds=window or 2 * settings.JOBS_SLOT_CHECK_SECONDS)
    grace = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + settings.JOBS_TICK_SECONDS * 5)
    start, end = now - grace - window, now - grace
    found = {"jobs": 0, "missing": 0, "unchecked": 0}
    due_ids = list(Job.objects.filter(enabled=True, schedule_type__in=RECURRING)
                   .filter(Q(slot_check_from__lt=end) | Q(slot_check_from__isnull=True))
                   .order_by("pk").values_list("pk", flat=True))
    slots = WindowSlots(start, end, now)
    for offset in range(0, len(due_ids), CHECK_CHUNK):
        ids = due_ids[offset:offset + CHECK_CHUNK]
        chunk = list(Job.objects.filter(pk__in=ids).select_related("crontab", "interval", "clocked").order_by("pk"))
        # Two queries for the chunk instead of two per job.
        changed = schedule_changes_at(ids)
        runs = {}
        for run in job_runs(ids, start, end):
            runs.setdefault(run.job_id, []).append(run)
        for job in chunk:
            begin = max(start, job.slot_check_from) if job.slot_check_from else start
            try:
                report = build(job, begin, end, now=now, alert=True,
                               known=(changed.get(job.pk), runs.get(job.pk, [])), slots_of=slots.between)
            except ValidationError:
                found["unchecked"] += 1  # more slots in the window than JOBS_SLOT_REPORT_MAX_SLOTS
            else:
                found["jobs"] += 1
                found["missing"] += len(report.missing)
        advance(chunk, [slots.first_from_end(job) for job in chunk])
    if found["missing"] or found["unchecked"]:
        logger.warning("slot check: %s", found)
    return found


class WindowSlots:
    """The slots of a pass's window, each cron schedule's computed once (jobs point at shared
    django-celery-beat rows, one per expression and timezone): croniter is most of a pass."""

    def __init__(self, start, end, now):
        self.start, self.end, self.now = start, end, now
        self.limit = settings.JOBS_SLOT_REPORT_MAX_SLOTS
        self.in_window, self.after = {}, {}

    def between(self, job, first, end):
        if job.schedule_type != ScheduleType.CRON or end != self.end or job.has_day_rules:
            return check_range(job, first, end, self.limit, now=self.now)
        key = cron_key(job)
        if key not in self.in_window:
            self.in_window[key] = check_range(job, self.start, self.end, self.limit, now=self.now)
        return [slot for slot in self.in_window[key] if slot >= first]

    def first_from_end(self, job):
        """The job's first slot at or after the window's end: where the next pass starts."""
        shared = job.schedule_type == ScheduleType.CRON and not job.has_day_rules
        if shared and cron_key(job) in self.after:
            return self.after[cron_key(job)]
        try:
            following = (job.slots_between(self.end, NO_MORE_SLOTS, 0) or [NO_MORE_SLOTS])[0]
        except (OverflowError, ValueError):
            following = NO_MORE_SLOTS
        if shared:
            self.after[cron_key(job)] = following
        return following


def cron_key(job):
    """What a cron job's slots depend on: its schedule row, its DST policy and its spread's offset."""
    return job.crontab_id, job.dst_skipped, job.dst_repeated, job.spread_offset


def advance(jobs, following):
    """Move each job's ``slot_check_from`` on to ``following``, unless the job was saved (edited,
    resumed) or checked by another pass since it was read: its new place is then not this one."""
    if connection.vendor != "postgresql":
        for job, at in zip(jobs, following, strict=True):
            Job.objects.filter(pk=job.pk, slot_check_from=job.slot_check_from, updated_at=job.updated_at).update(
                slot_check_from=at) if job.slot_check_from else Job.objects.filter(
                pk=job.pk, slot_check_from__isnull=True, updated_at=job.updated_at).update(slot_check_from=at)
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Job._meta.db_table} AS j SET slot_check_from = v.following "
            "FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::timestamptz[]) "
            "AS v(id, seen, updated_at, following) "
            "WHERE j.id = v.id AND j.updated_at = v.updated_at AND j.slot_check_from IS NOT DISTINCT FROM v.seen",
            [[job.pk for job in jobs], [job.slot_check_from for job in jobs], [job.updated_at for job in jobs],
             following],
        )
