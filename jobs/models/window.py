"""A maintenance window: a stretch of time in which some jobs (``jobs``, by id, and those with one of
``tags``) are held or muted. One-off (``starts_at``, ``ends_at``) or recurring (a ``cron`` start in a
``timezone``, lasting ``duration_seconds``).

``hold``: the scheduler records each slot inside as a run skipped with the reason "maintenance"
(``jobs.scheduling.windows``); ``mute``: the slots run and no notification is sent of a run whose
slot or end falls inside (notifications.sending). A window reaches only the jobs its owner (and
team) may see; a shared one (staff's) every job it names.
"""

import threading
import time
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone as dj_timezone

from ..timing.schedules import next_cron_slot, validate_cron, validate_timezone
from .calendar import NAME_PATTERN, NAME_RULE
from .fields import Shareable

MAX_DURATION_SECONDS = 7 * 24 * 3600  # a recurring window's length; a longer stop is a pause
MAX_JOBS = 1000  # ids named by one window
MAX_TAGS = 50


class WindowMode(models.TextChoices):
    HOLD = "hold", "hold (skip the slots inside)"
    MUTE = "mute", "mute (run them, notify nothing)"


class Window(Shareable):
    name = models.CharField(max_length=100, unique=True, validators=[RegexValidator(NAME_PATTERN, NAME_RULE)],
                            help_text=NAME_RULE)
    description = models.TextField(blank=True)
    mode = models.CharField(max_length=8, choices=WindowMode.choices, default=WindowMode.HOLD)
    starts_at = models.DateTimeField(null=True, blank=True, help_text="A one-off window's start.")
    ends_at = models.DateTimeField(null=True, blank=True, help_text="A one-off window's end (after its start).")
    cron = models.CharField(max_length=200, blank=True,
                            help_text="A recurring window's starts, a cron expression (such as 0 2 * * 0).")
    duration_seconds = models.PositiveIntegerField(null=True, blank=True,
                                                   help_text="How long a recurring window lasts from each start.")
    timezone = models.CharField(max_length=64, blank=True, help_text="The zone of the cron expression (default UTC).")
    jobs = models.JSONField(default=list, blank=True, help_text="Ids of the jobs it applies to.")
    tags = models.JSONField(default=list, blank=True, help_text="It applies to the jobs with any of these tags too.")
    created_at = models.DateTimeField(verbose_name="created", auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(starts_at__isnull=False, ends_at__isnull=False, cron="", duration_seconds__isnull=True)
                           | Q(starts_at__isnull=True, ends_at__isnull=True, duration_seconds__isnull=False)
                           & ~Q(cron="")),
                name="window_one_off_or_recurring"),
        ]

    def __str__(self):
        return self.name

    @property
    def recurring(self):
        return bool(self.cron)

    def clean(self):
        errors = {}
        one_off = self.starts_at is not None or self.ends_at is not None
        recurring = bool(self.cron) or self.duration_seconds is not None or bool(self.timezone)
        if one_off and recurring:
            errors["__all__"] = ["A window is one-off (starts_at and ends_at) or recurring (cron, duration_seconds "
                                 "and timezone), not both."]
        elif not one_off and not recurring:
            errors["__all__"] = ["Give starts_at and ends_at (a one-off window) or cron and duration_seconds "
                                 "(a recurring one)."]
        elif one_off:
            for name in ("starts_at", "ends_at"):
                if getattr(self, name) is None:
                    errors[name] = ["A one-off window needs both starts_at and ends_at."]
            if not errors and self.ends_at <= self.starts_at:
                errors["ends_at"] = ["The end must come after the start."]
        else:
            self.timezone = self.timezone or "UTC"
            for name, check in (("cron", validate_cron), ("timezone", validate_timezone)):
                try:
                    check(getattr(self, name))
                except ValidationError as exc:
                    errors[name] = exc.messages
            if self.duration_seconds is None:
                errors["duration_seconds"] = ["A recurring window needs duration_seconds."]
            elif not 1 <= self.duration_seconds <= MAX_DURATION_SECONDS:
                errors["duration_seconds"] = [f"Between 1 and {MAX_DURATION_SECONDS} seconds (7 days)."]
        for name, kind, limit in (("jobs", int, MAX_JOBS), ("tags", str, MAX_TAGS)):
            value = getattr(self, name)
            if not isinstance(value, list) or len(value) > limit or \
                    not all(isinstance(item, kind) and not isinstance(item, bool) for item in value):
                errors[name] = [f"A list of at most {limit} {'job ids' if kind is int else 'tags'}."]
            elif kind is str and any(not item or len(item) > 100 or "\x00" in item for item in value):
                errors[name] = ["A tag is a text of 1 to 100 characters."]
            else:
                setattr(self, name, sorted(set(value)))
        if errors:
            raise ValidationError(errors)

    def duration(self):
        if self.recurring:
            return timedelta(seconds=self.duration_seconds)
        return self.ends_at - self.starts_at

    def span_at(self, moment):
        """(start, end) of the stretch of this window that holds ``moment``, or None."""
        if not self.recurring:
            return (self.starts_at, self.ends_at) if self.starts_at <= moment < self.ends_at else None
        length = timedelta(seconds=self.duration_seconds)
        start = next_cron_slot(self.cron, self.timezone or "UTC", moment - length)  # the first start after it
        return (start, start + length) if start <= moment else None

    def next_span(self, moment):
        """(start, end) of the stretch that holds ``moment`` or comes next, or None (a one-off past)."""
        if found := self.span_at(moment):
            return found
        if not self.recurring:
            return (self.starts_at, self.ends_at) if moment < self.starts_at else None
        start = next_cron_slot(self.cron, self.timezone or "UTC", moment)
        return (start, start + timedelta(seconds=self.duration_seconds))

    def spans_between(self, start, end, most=10_000):
        """The (start, end) stretches of this window that overlap [start, end), at most ``most``."""
        found, span = [], self.next_span(start)
        while span is not None and span[0] < end and len(found) < most:
            found.append(span)
            span = self.next_span(span[1]) if self.recurring else None
        return found


def hold_reason(window):
    """A held slot's skipped run's reason: the reports group by it, "why" shows it."""
    return f"maintenance: window {window.name}"


class WindowBook:
    """Per process: the windows that may still hold or mute a slot, each with the ids of the jobs it
    reaches, so that the scheduler's tick and a run's notifications ask it per job with no query of
    their own. The windows are read again at most every ``CHECK_SECONDS`` (one small query); the
    jobs their tags reach when a window changed, else every ``REACH_SECONDS`` (100 windows over
    10,000 tagged jobs: 200 ms, bench/windows.py)."""

    CHECK_SECONDS = 1.0
    REACH_SECONDS = 10.0  # a job given a window's tag is reached within this
    PAST = timedelta(days=1)  # a one-off window ended longer ago holds no slot a tick still places

    def __init__(self):
        self.lock = threading.Lock()
        self.loaded_at, self.reached_at, self.generation, self.by_mode = float("-inf"), float("-inf"), None, {}

    def refresh(self, force=False):
        now = time.monotonic()
        if not force and now - self.loaded_at < self.CHECK_SECONDS:
            return
        windows = list(Window.objects.filter(Q(ends_at__isnull=True) | Q(ends_at__gt=dj_timezone.now() - self.PAST))
                       .select_related("owner").order_by("pk"))
        generation = [(window.pk, window.updated_at) for window in windows]
        if generation == self.generation and now - self.reached_at < self.REACH_SECONDS:
            self.loaded_at = now
            return
        by_mode = {mode: {} for mode in WindowMode.values}  # {mode: {job id: [windows]}}
        for window, reached in zip(windows, jobs_reached(windows), strict=True):
            for job_id in reached:
                by_mode[window.mode].setdefault(job_id, []).append(window)
        with self.lock:
            self.loaded_at = self.reached_at = now
            self.generation, self.by_mode = generation, by_mode

    def covering(self, mode, job_id, *moments):
        """The first window of ``mode`` that reaches the job and holds any of ``moments``, or None."""
        self.refresh()
        for window in self.by_mode.get(mode, {}).get(job_id, ()):
            if any(m is not None and window.span_at(m) for m in moments):
                return window
        return None

    def any(self, mode):
        self.refresh()
        return bool(self.by_mode.get(mode))

    def reaching(self, mode, force=False):
        """{job id: [the windows of ``mode`` that reach it]}."""
        self.refresh(force)
        return self.by_mode.get(mode, {})


def jobs_reached(windows):
    """For each window, the set of ids of the jobs it reaches: those it names, and those with one
    of its tags that its owner (or team) may see (a shared window's or staff's: every one)."""
    from django.contrib.auth.models import Group

    from .job import Job

    tags = {tag for window in windows for tag in window.tags}
    by_tag = {}  # {tag: [(job id, owner id, group id)]}
    if tags:
        # One ?| of every tag (100 ORed @> took 400 ms over 10,000 jobs). SQLite reads an array's
        # strings as no keys: there every job with tags is read, and matched below.
        tagged = (Job.objects.filter(tags__has_any_keys=sorted(tags)) if connection.features.supports_json_field_contains
                  else Job.objects.exclude(tags=[]))
        for pk, job_tags, owner_id, group_id in tagged.values_list("pk", "tags", "owner_id", "group_id"):
            for tag in tags.intersection(job_tags or ()):
                by_tag.setdefault(tag, []).append((pk, owner_id, group_id))
    owners = {window.owner_id for window in windows if window.tags and window.owner_id}
    groups_of = {}
    for user_id, group_id in Group.user_set.through.objects.filter(user_id__in=owners).values_list("user_id",
                                                                                                     "group_id"):
        groups_of.setdefault(user_id, set()).add(group_id)
    found = []
    for window in windows:
        reached = set(window.jobs)
        if window.tags:
            everyone = window.shared or window.owner is None or window.owner.is_staff or window.owner.is_superuser
            teams = groups_of.get(window.owner_id, set()) | ({window.group_id} if window.group_id else set())
            reached.update(pk for tag in window.tags for pk, owner_id, group_id in by_tag.get(tag, ())
                           if everyone or owner_id == window.owner_id or group_id in teams)
        found.append(reached)
    return found


def active_or_next(job_id, moment, limit=1):
    """[(window, (start, end))] of the windows that reach the job, the one on now or next first (read
    afresh: a page shows a window saved a moment ago)."""
    window_book.refresh(force=True)
    found = []
    for by_job in window_book.by_mode.values():
        for window in by_job.get(job_id, ()):
            if span := window.next_span(moment):
                found.append((window, span))
    return sorted(found, key=lambda item: item[1][0])[:limit]


window_book = WindowBook()
