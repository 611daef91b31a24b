"""Defining jobs: the schedule object of the API and the admin, and pause/resume."""

import json
from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

from .. import kinds
from ..models import Job, ScheduleType
from ..timing import dst, schedules, spread

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


def stopped_by_soft_time_limit(kind):
    """Whether Celery's soft time limit stops an attempt of ``kind`` at its timeout (a function in the
    worker's process); other kinds stop themselves and get the hard limit only, as a backstop."""
    spec = kinds.get(kind)
    return spec is not None and spec.soft_time_limit


def schedule_of(job):
    if job.schedule_type == ScheduleType.CRON:
        written = getattr(job, "cron_text", "") or job.cron_expression  # with its H, as the user wrote it
        return {"type": "cron", "cron": written, "timezone": str(job.crontab.timezone)}
    if job.schedule_type == ScheduleType.INTERVAL:
        return {"type": "interval", "every_seconds": int(job.every_seconds)}
    if job.schedule_type == ScheduleType.ONCE:
        return {"type": "once", "run_at": job.clocked.clocked_time.isoformat()}
    return {"type": "manual"}


def dst_preview(job, now=None):
    """The job's ``dst_preview``: its zone's next two clock changes and what its DST policy does to
    each affected slot (``jobs.timing.dst.preview``); None for a schedule that is not cron."""
    if job.schedule_type != ScheduleType.CRON or job.crontab is None:
        return None
    return dst.preview(job.cron_expression, str(job.crontab.timezone), job.dst_skipped, job.dst_repeated,
                       now or timezone.now())


def restart_if_dst_policy_changed(job, stored):
    """A new DST policy is a new schedule: the next slot is computed again from now, and the slot
    check starts afresh. ``job`` is not saved."""
    changed = (job.dst_skipped, job.dst_repeated) != (stored.dst_skipped, stored.dst_repeated)
    if changed and job.enabled and job.schedule_type == ScheduleType.CRON:
        job.next_run_at = None
        job.next_run_at = job.first_slot()
        job.slot_check_from = job.ping_check_from = None


def _schedule_row(spec, name):
    """(the job's field, the schedule model, the row's values) of a parsed ``spec`` for the job
    called ``name`` (an H resolved for it); None for manual."""
    if spec["type"] == "cron":
        minute, hour, dom, month, dow = spread.resolve(spec["cron"], name).split()
        return "crontab", CrontabSchedule, {"minute": minute, "hour": hour, "day_of_month": dom,
                                            "month_of_year": month, "day_of_week": dow,
                                            "timezone": spec["timezone"]}
    if spec["type"] == "interval":
        return "interval", IntervalSchedule, {"every": spec["every_seconds"], "period": IntervalSchedule.SECONDS}
    if spec["type"] == "once":
        return "clocked", ClockedSchedule, {"clocked_time": spec["run_at"]}
    return None


def _point_at(job, spec, row_for):
    rows = {}
    if found := _schedule_row(spec, job.name):
        field, model, values = found
        rows[field] = row_for(model, values)
    _point(job, spec["type"], rows)
    _keep_written(job, spec)
    job.next_run_at = job.first_slot()
    return job


def _keep_written(job, spec):
    """Keep a cron expression with H as written (``Job.cron_text``); only jobs have a place for it."""
    hashed = spec["type"] == "cron" and spread.uses_hash(spec["cron"])
    if not isinstance(job, Job):
        if hashed:
            raise ValidationError({"cron": "H is for jobs' cron expressions: write the numbers here."})
        return
    job.cron_text = spec["cron"] if hashed else ""


def resolve_again_if_renamed(job):
    """A job whose cron expression has H and whose name changed gets the numbers of its new name
    (its next slot recomputed); any other job is left as it is."""
    if (job.schedule_type == ScheduleType.CRON and job.cron_text and job.crontab_id
            and spread.resolve(job.cron_text, job.name) != job.cron_expression):
        apply_schedule(job, schedule_of(job))


def apply_schedule(job, spec):
    """Point ``job`` at django-celery-beat schedule rows for ``spec`` and compute its next slot.

    Schedule rows are shared (get_or_create), never edited in place, as django-celery-beat does.
    The job is not saved.
    """
    return _point_at(job, parse_schedule(spec), lambda model, values: model.objects.get_or_create(**values)[0])


def preview_schedule(spec, name="", spread_seconds=0):
    """An unsaved new job on ``spec`` (called ``name``, with ``spread_seconds``), with unsaved
    schedule rows: what the pages ask for the schedule's description and next slots as it is typed.
    Writes nothing."""
    return _point_at(Job(name=name, spread=spread_seconds), parse_schedule(spec), lambda model, values: model(**values))


def as_scheduled(job, spec):
    """``job`` (not saved, nor its rows) pointed at ``spec``: the job as it was under an earlier
    schedule, read back from the audit trail by the on-time reports."""
    return _point_at(job, parse_schedule(spec), lambda model, values: model(**values))


def _point(job, schedule_type, rows):
    job.schedule_type = schedule_type
    job.crontab, job.interval, job.clocked = rows.get("crontab"), rows.get("interval"), rows.get("clocked")
    job.next_run_at = None  # an interval's grid is anchored on next_run_at: start afresh
    job.slot_check_from = job.ping_check_from = None  # the slot checks' places were in the old schedule


def save_job(job, schedule=None):
    """Validate and save a job, applying ``schedule`` when given. Raises ValidationError."""
    with transaction.atomic():
        if schedule is not None:
            apply_schedule(job, schedule)
        else:
            resolve_again_if_renamed(job)
        job.full_clean()
        job.save()
    return job


def restart_if_reenabled(obj, was_enabled):
    """Enabling a job or a workflow is a resume: its schedule starts from now, and the slots that
    fell while it was off are not run. ``obj`` is not saved."""
    if obj.enabled and not was_enabled:
        obj.next_run_at = None  # an interval's grid is anchored on next_run_at: start afresh
        obj.next_run_at = obj.first_slot()
        if isinstance(obj, Job):  # a workflow has no slot check, nor auto-pause
            obj.slot_check_from = None
            obj.ping_check_from = obj.next_run_at  # a check-in's slots while it was paused are not missed
            obj.consecutive_failures, obj.paused_reason = 0, ""


DAY_RULES = ("calendars", "business_days", "business_day_of_month")


def replan_if_days_changed(job, stored):
    """A job whose day rules changed, its schedule kept, starts again from its first open slot from
    now (a slot it had may now be closed, or an earlier one open). ``job`` is not saved."""
    if job.enabled and stored.enabled and any(getattr(job, name) != getattr(stored, name) for name in DAY_RULES):
        job.next_run_at = job.first_slot()
        job.slot_check_from = job.ping_check_from = None


def follow_spread(job, stored):
    """Move a saved job's next slot by the change of its offset (its ``spread`` or its name
    changed, ``stored`` is the row before): the slot the schedule stands at keeps its place in it."""
    moved = job.spread_offset - stored.spread_offset
    if moved and job.next_run_at is not None:
        job.next_run_at += moved


def pause(obj, reason=""):
    """Stop the schedule of a job or a workflow. ``reason``: why the service paused a job itself
    (auto-pause, jobs.lifecycle.streaks); a person's pause has none."""
    paused = {"enabled": False}
    if isinstance(obj, Job):
        paused["paused_reason"] = obj.paused_reason = reason
    type(obj).objects.filter(pk=obj.pk).update(**paused)
    obj.enabled = False


def resume(obj):
    """Enable a job or a workflow again from now on: slots that fell while it was paused are not run;
    a job's failure streak and the reason it paused itself are cleared."""
    obj.enabled = True
    restart_if_reenabled(obj, was_enabled=False)
    restarted = {"enabled": True, "next_run_at": obj.next_run_at}
    if isinstance(obj, Job):
        restarted.update(slot_check_from=None, ping_check_from=obj.next_run_at, consecutive_failures=0,
                         paused_reason="")
    type(obj).objects.filter(pk=obj.pk).update(**restarted)


# --- many jobs at once (jobs apply)

BULK_BATCH = 2000


def _spec_key(spec):
    return (spec["type"], spec.get("cron"), spec.get("timezone"), spec.get("every_seconds"), spec.get("run_at"))


def _cron_key(spec, name):
    return (*spread.resolve(spec["cron"], name).split(), spec["timezone"])


class ScheduleRows:
    """The django-celery-beat rows of many schedule objects, found or made in a few queries (what
    ``apply_schedule``'s get_or_create does for one), and each schedule parsed once."""

    def __init__(self, named_specs):
        """``named_specs``: [(schedule object, the job's name)] (the name resolves an H)."""
        self.parsed, names = {}, {}
        for spec, name in named_specs:
            key = _spec_key(spec)
            if key not in self.parsed:
                self.parsed[key] = parse_schedule(spec)
            if self.parsed[key]["type"] == "cron" and spread.uses_hash(self.parsed[key]["cron"]):
                names.setdefault(key, set()).add(name)
        wanted = list(self.parsed.values())
        crons = {_cron_key(s, name) for key, s in self.parsed.items() if s["type"] == "cron"
                 for name in names.get(key, [""])}
        self.crontabs = {}
        if crons:
            # Every schedule row's key is read (a few thousand), but only the wanted rows are made.
            first_ids = {}
            for pk, *key in CrontabSchedule.objects.order_by("id").values_list(
                    "id", "minute", "hour", "day_of_month", "month_of_year", "day_of_week", "timezone"):
                key = (*key[:5], str(key[5]))
                if key in crons:
                    first_ids.setdefault(key, pk)
            found = CrontabSchedule.objects.in_bulk(list(first_ids.values()))
            self.crontabs = {key: found[pk] for key, pk in first_ids.items()}
            missing = [CrontabSchedule(minute=k[0], hour=k[1], day_of_month=k[2], month_of_year=k[3], day_of_week=k[4],
                                       timezone=k[5]) for k in sorted(crons - set(self.crontabs))]
            for row in CrontabSchedule.objects.bulk_create(missing, batch_size=BULK_BATCH):
                key = (row.minute, row.hour, row.day_of_month, row.month_of_year, row.day_of_week, str(row.timezone))
                self.crontabs[key] = row
        everys = sorted({s["every_seconds"] for s in wanted if s["type"] == "interval"})
        self.intervals = {}
        if everys:
            for row in IntervalSchedule.objects.filter(period=IntervalSchedule.SECONDS, every__in=everys).order_by("id"):
                self.intervals.setdefault(row.every, row)
            missing = [IntervalSchedule(every=every, period=IntervalSchedule.SECONDS)
                       for every in everys if every not in self.intervals]
            self.intervals.update((row.every, row) for row in IntervalSchedule.objects.bulk_create(missing))
        moments = sorted({s["run_at"] for s in wanted if s["type"] == "once"})
        self.clocked = {}
        if moments:
            for row in ClockedSchedule.objects.filter(clocked_time__in=moments).order_by("id"):
                self.clocked.setdefault(row.clocked_time, row)
            missing = [ClockedSchedule(clocked_time=moment) for moment in moments if moment not in self.clocked]
            self.clocked.update((row.clocked_time, row) for row in ClockedSchedule.objects.bulk_create(missing))
    # The cron jobs' first slots from one moment, by schedule: the jobs of one schedule share it, and a
    # file's chunks, saved from one moment, share them across their ScheduleRows (a mix of 100,000 jobs
    # holds some 6,000 schedules, each in every chunk). Another moment starts afresh.
    first_slots = (None, {})

    def apply(self, job, spec, now):
        """``apply_schedule`` from the rows found: the job is pointed at them, its next slot computed
        from ``now`` (one moment for the whole batch, so a cron's next slot is computed once)."""
        spec = self.parsed[_spec_key(spec)]
        kind = spec["type"]
        rows = ({"crontab": self.crontabs[_cron_key(spec, job.name)]} if kind == "cron"
                else {"interval": self.intervals[spec["every_seconds"]]} if kind == "interval"
                else {"clocked": self.clocked[spec["run_at"]]} if kind == "once" else {})
        _point(job, kind, rows)
        _keep_written(job, spec)
        if kind == "cron" and not job.has_day_rules:  # a job's day rules make its next slot its own
            key = (_cron_key(spec, job.name), job.spread_offset, job.dst_skipped, job.dst_repeated)
            moment, slots = ScheduleRows.first_slots
            if moment != now:
                slots = {}
                ScheduleRows.first_slots = (now, slots)
            if key not in slots:
                slots[key] = job.first_slot(now)
            job.next_run_at = slots[key]
        else:
            job.next_run_at = job.first_slot(now)


# What saving a job may set besides the caller's values: its schedule, next slot and time of change.
SAVED_WITH_A_JOB = {"schedule_type", "crontab", "interval", "clocked", "next_run_at", "slot_check_from", "updated_at",
                    "enabled", "consecutive_failures", "paused_reason", "cron_text", "spread_offset_seconds",
                    "ping_key", "ping_check_from"}


def save_jobs(items, checked_fields=(), update_fields=None, now=None):
    """``save_job`` for many jobs at once, new and saved ones mixed: ``items`` is [(job, schedule or
    None)]. Every job is checked as ``save_job`` checks it (``Job.full_clean``, its fields in
    ``checked_fields`` left out: the caller has checked them the same way, as the API's serializer
    does), then the new ones are inserted and the others updated in batches (``update_fields``, and
what a schedule and a save set, or every field). Uniqueness and the
    database's constraints are the database's (a violation raises). Returns {index: ValidationError};
    nothing is saved when there is any."""
    now = now or timezone.now()
    with transaction.atomic():
        rows = ScheduleRows((schedule, job.name) for job, schedule in items if schedule is not None)
        # The schedule rows were found or made here, and a foreign key's check is a query per job.
        exclude = [*checked_fields, "crontab", "interval", "clocked", "last_run"]
        errors, new, changed, fields = {}, [], [], set()
        for index, (job, schedule) in enumerate(items):
            if schedule is not None:
                rows.apply(job, schedule, now)
            try:
                job.full_clean(exclude=exclude, validate_unique=False, validate_constraints=False)
            except ValidationError as exc:
                errors[index] = exc
                continue
            (new if job.pk is None else changed).append(job)
        if errors:
            return errors
        insert_jobs(new)
        if changed:
            fields = [f.name for f in Job._meta.concrete_fields if f.name not in ("id", "created_at", "last_run")
                      and (update_fields is None or f.name in update_fields or f.name in SAVED_WITH_A_JOB)]
            for job in changed:
                job.updated_at = now
            Job.objects.bulk_update(changed, fields, batch_size=BULK_BATCH // 4)
    return {}


def insert_jobs(jobs):
    """``Job.objects.bulk_create(jobs)``, the ids set on the jobs; on PostgreSQL by COPY, the ids
    taken from the table's sequence first: some ten times faster at 100,000 jobs (an INSERT of many
    rows spends most of its time building the statement and adapting each value). The jobs were
    checked (``full_clean``); the values written are the model's own, as bulk_create writes them."""
    if connection.vendor != "postgresql" or not jobs:
        Job.objects.bulk_create(jobs, batch_size=BULK_BATCH)
        return
    fields = Job._meta.concrete_fields
    stamped = [f for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                       [Job._meta.db_table, len(jobs)])
        for job, (pk,) in zip(jobs, cursor.fetchall(), strict=True):
            job.pk = pk
            for f in stamped:
                f.pre_save(job, True)
    names = [f.attname for f in fields]
    copy_rows(Job, fields, ([values[name] for name in names] for values in (job.__dict__ for job in jobs)))
    for job in jobs:
        job._state.adding, job._state.db = False, connection.alias


def copy_rows(model, fields, rows):
    """Write ``rows`` (each the values of ``fields`` of a ``model``, in their order, as the model would
    write them) in one binary COPY, on PostgreSQL: what ``insert_jobs`` and a job's versions
    (``versions``) insert in bulk."""
    from psycopg.types.json import set_json_dumps  # PostgreSQL's driver, not needed with SQLite

    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
                       [model._meta.db_table])
        types = dict(cursor.fetchall())
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        set_json_dumps(json_text, cursor.cursor)
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([types[f.column] for f in fields])
            for row in rows:
                copy.write_row(row)


def json_text(value):
    """json.dumps, the empty list and object (most of a job's JSON values) without it."""
    return "[]" if value == [] else "{}" if value == {} else json.dumps(value)
