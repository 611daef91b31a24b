"""Defining jobs: the schedule object of the API and the admin, and pause/resume."""

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

from . import schedules
from .models import ScheduleType

MAX_INTERVAL_SECONDS = 10 * 365 * 86400  # IntervalSchedule.every is a 32-bit integer


def contains_nul(value):
    """Whether a JSON value holds a NUL character, which PostgreSQL cannot store in text."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


def parse_schedule(spec):
    """Validate a schedule object ({"type": "cron", ...}) and return it normalised."""
    if not isinstance(spec, dict):
        raise ValidationError({"schedule": "Must be an object with a 'type'."})
    kind = spec.get("type")
    keys = {"cron": {"type", "cron", "timezone"}, "interval": {"type", "every_seconds"},
            "once": {"type", "run_at"}, "manual": {"type"}}
    if kind not in keys:
        raise ValidationError({"schedule": f"'type' must be one of {', '.join(keys)}."})
    extra = set(spec) - keys[kind]
    if extra:
        raise ValidationError({"schedule": f"A {kind} schedule takes no {', '.join(sorted(extra))}: "
                                           "give exactly one kind of schedule."})
    if kind == "cron":
        expression = " ".join(str(spec.get("cron") or "").split())
        zone = spec.get("timezone") or "UTC"
        errors = {}
        for name, check, value in (("cron", schedules.validate_cron, expression),
                                   ("timezone", schedules.validate_timezone, zone)):
            try:
                check(value)
            except ValidationError as exc:
                errors[name] = exc.messages
        if errors:
            raise ValidationError(errors)
        return {"type": "cron", "cron": expression, "timezone": zone}
    if kind == "interval":
        every = spec.get("every_seconds")
        if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= MAX_INTERVAL_SECONDS:
            raise ValidationError(
                {"every_seconds": f"Must be a whole number of seconds from 1 to {MAX_INTERVAL_SECONDS}."})
        return {"type": "interval", "every_seconds": every}
    if kind == "once":
        run_at = spec.get("run_at")
        parsed = run_at if isinstance(run_at, datetime) else parse_datetime(str(run_at or ""))
        if parsed is None:
            raise ValidationError({"run_at": "Must be an ISO 8601 date and time."})
        if timezone.is_naive(parsed):
            raise ValidationError({"run_at": "Must include a UTC offset or Z."})
        try:
            parsed = parsed.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValidationError({"run_at": "Is out of the range of dates."}) from None
        return {"type": "once", "run_at": parsed}
    return {"type": "manual"}


def schedule_of(job):
    if job.schedule_type == ScheduleType.CRON:
        return {"type": "cron", "cron": job.cron_expression, "timezone": str(job.crontab.timezone)}
    if job.schedule_type == ScheduleType.INTERVAL:
        return {"type": "interval", "every_seconds": int(job.every_seconds)}
    if job.schedule_type == ScheduleType.ONCE:
        return {"type": "once", "run_at": job.clocked.clocked_time.isoformat()}
    return {"type": "manual"}


def apply_schedule(job, spec):
    """Point ``job`` at django-celery-beat schedule rows for ``spec`` and compute its next slot.

    Schedule rows are shared (get_or_create), never edited in place, as django-celery-beat does.
    The job is not saved.
    """
    spec = parse_schedule(spec)
    job.schedule_type = spec["type"]
    job.crontab = job.interval = job.clocked = None
    if spec["type"] == "cron":
        minute, hour, dom, month, dow = spec["cron"].split()
        job.crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow,
            timezone=spec["timezone"])
    elif spec["type"] == "interval":
        job.interval, _ = IntervalSchedule.objects.get_or_create(every=spec["every_seconds"],
                                                                 period=IntervalSchedule.SECONDS)
    elif spec["type"] == "once":
        job.clocked, _ = ClockedSchedule.objects.get_or_create(clocked_time=spec["run_at"])
    job.next_run_at = None
    job.next_run_at = job.first_slot()
    return job


def save_job(job, schedule=None):
    """Validate and save a job, applying ``schedule`` when given. Raises ValidationError."""
    with transaction.atomic():
        if schedule is not None:
            apply_schedule(job, schedule)
        job.full_clean()
        job.save()
    return job


def restart_if_reenabled(obj, was_enabled):
    """Enabling a job or a workflow is a resume: its schedule starts from now, and the slots that
    fell while it was off are not run. ``obj`` is not saved."""
    if obj.enabled and not was_enabled:
        obj.next_run_at = None  # an interval's grid is anchored on next_run_at: start afresh
        obj.next_run_at = obj.first_slot()


def pause(obj):
    """Stop the schedule of a job or a workflow."""
    type(obj).objects.filter(pk=obj.pk).update(enabled=False)
    obj.enabled = False


def resume(obj):
    """Enable a job or a workflow again from now on: slots that fell while it was paused are not run."""
    obj.enabled = True
    restart_if_reenabled(obj, was_enabled=False)
    type(obj).objects.filter(pk=obj.pk).update(enabled=True, next_run_at=obj.next_run_at)
