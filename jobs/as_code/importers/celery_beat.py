"""Jobs from django-celery-beat's ``PeriodicTask`` rows (``manage.py jobs import celery-beat``).

How beat reads a row (``django_celery_beat.schedulers.ModelEntry``), and what the job does:

- crontab (with its zone), interval and clocked schedules become cron, interval and once
  schedules. Celery's crontab runs on days that match both its day of month and its day of week,
  cron's on days that match either: a row that restricts both is refused, saying so. A solar
  schedule has no equivalent and is refused.
- ``one_off``: beat runs the row once, at the first slot after its last run (or its last change),
  or at ``start_time`` when it has one; the job is a once schedule at that moment.
- ``start_time`` holds every run until then: a once schedule runs no earlier; a recurring job whose
  start is still to come is imported paused (a job has no start date), and the report says so.
- ``expires``: beat stops at that moment. Passed, the job is imported paused; on a once schedule
  the moment is its start deadline; a recurring job has no end date, and the report says so.
  ``expire_seconds`` (when ``expires`` is not set) is how late a message may start: the job's
  start deadline.
- the task: a job function of that name (``@job_function``) is a ``callable`` job, and a Celery task
  of a module in ``JOBS_CALLABLE_MODULES`` a ``task`` job (its function runs inside the job's
  attempt). Any other Celery task's row is reported as not carried over, saying why; a name neither
  knows is an error, and nothing is imported.
- ``priority``: Celery's on Redis is 0 the most urgent, on RabbitMQ 9; a job's is 9 the most urgent.
- the service's own tasks (``celery.*``, the service's apps) are left to beat.
"""

import json
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django_celery_beat.models import PeriodicTask, PeriodicTasks

from ... import kinds
from ...kinds.callable import registry
from ...kinds.task import tasks as celery_tasks
from ...models import Job
from ...timing import schedules
from . import Import, Row

TAG = "celery-beat"
SERVICE_PACKAGES = {"jobs", "notifications", "workflows", "scheduler_site", "audit", "sso", "celery"}
PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}
MOST_URGENT = 9


def read(now):
    """(the ``Import`` of every PeriodicTask row, the ids of the rows whose jobs it makes or made)."""
    imported, carried = Import(), {}
    current_app.loader.import_default_modules()  # the tasks of the apps, which a worker imports as it starts
    tasks = PeriodicTask.objects.select_related("crontab", "interval", "solar", "clocked").order_by("id")
    for task in tasks:
        row = Row(f"PeriodicTask {task.pk} {task.name!r} ({task.task})", job=task.name)
        imported.rows.append(row)
        entry = entry_of(task, row, imported.errors, now)
        if entry is not None:
            imported.add("jobs", entry)
            carried[task.name] = task.pk
    taken = imported.keep_existing()
    ours = {name for name, tags in Job.objects.filter(name__in=taken).values_list("name", "tags") if TAG in tags}
    for row in imported.rows:  # a job of the same name that no import made: its row stays as it is
        if row.existing and row.job not in ours:
            row.lost.append("a job of this name that no import made exists: the row is left enabled.")
    return imported, [pk for name, pk in carried.items() if name not in taken or name in ours]


def disable(ids):
    """Disable the rows and tell beat (``PeriodicTasks.changed``: an ``update`` alone goes unseen)."""
    if PeriodicTask.objects.filter(pk__in=ids, enabled=True).update(enabled=False):
        PeriodicTasks.update_changed()


def enabled_among(ids):
    return list(PeriodicTask.objects.filter(pk__in=ids, enabled=True).order_by("id").values_list("name", flat=True))


def entry_of(task, row, errors, now):
    """The jobs-file entry of ``task``, noting on ``row`` what carried over; None when it does not."""
    if is_the_services(task.task):
        row.refused = "the service's own task: beat keeps sending it."
        return None
    kind = kind_of(task.task)
    if kind is None:
        errors.append(
            f"{row.source}: task: no job function nor Celery task is registered as {task.task!r} "
            "(JOBS_CALLABLE_MODULES lists the modules that register them); delete or fix the row."
        )
        return None
    if kind == "celery":
        row.refused = (
            f"{task.task} is a Celery task outside JOBS_CALLABLE_MODULES: add its module to the setting, "
            "and a task job runs it."
            if kinds.get("task") is not None else
            f"needs the task kind: {task.task} is a Celery task, not a job function (@job_function), "
            "and the task kind is not in JOBS_KINDS."
        )
        return None
    arguments = parsed_arguments(task, row, errors)
    if arguments is None:
        return None
    schedule = schedule_of(task, row, now)
    if schedule is None:
        return None
    entry = {
        "name": task.name,
        "kind": kind,
        "target": task.task,
        "schedule": schedule,
        **arguments,
        "tags": [TAG],
        "enabled": task.enabled,
    }
    row.carried.append(f"{kind} {task.task}" + (", args and kwargs" if any(arguments.values()) else ""))
    if task.description:
        entry["description"] = task.description
    if not task.enabled:
        row.carried.append("disabled")
    timing(task, entry, row, now)
    delivery(task, entry, row)
    return entry


def is_the_services(name):
    task = current_app.tasks.get(name)
    module = getattr(task, "__module__", "") or ""
    return name.startswith("celery.") or module.split(".")[0] in SERVICE_PACKAGES


def kind_of(name):
    """ "callable", "task" or "celery" (a Celery task no job may run); None for a name unknown to both."""
    if registry.get_function(name) is not None:
        return "callable"
    if name not in current_app.tasks:
        return None
    return "task" if kinds.get("task") is not None and celery_tasks.get(name) is not None else "celery"


def parsed_arguments(task, row, errors):
    values = {}
    for key, text, kind in (("args", task.args, list), ("kwargs", task.kwargs, dict)):
        try:
            value = json.loads(text or ("[]" if kind is list else "{}"))
        except ValueError as exc:
            errors.append(f"{row.source}: {key}: not JSON ({exc}).")
            return None
        if not isinstance(value, kind):
            errors.append(f"{row.source}: {key}: must be a JSON {'list' if kind is list else 'object'}.")
            return None
        if value:
            values[key] = value
    return values


def schedule_of(task, row, now):
    """The job's schedule object for the row's schedule (once for a one-off); None when refused."""
    if task.solar_id:
        solar = task.solar
        row.refused = (
            f"a solar schedule ({solar.event} at {solar.latitude}, {solar.longitude}) has no "
            "equivalent: a job runs on cron, interval or once schedules."
        )
        return None
    if task.crontab_id:
        c = task.crontab
        if c.day_of_month.strip() != "*" and c.day_of_week.strip() != "*":
            row.refused = (
                f"the crontab restricts both the day of month ({c.day_of_month}) and the day of week "
                f"({c.day_of_week}): Celery runs on days that match both, cron on days that match "
                "either. Split it into rows that restrict one of them."
            )
            return None
        cron = " ".join((c.minute, c.hour, c.day_of_month, c.month_of_year, c.day_of_week))
        spec = {"type": "cron", "cron": cron, "timezone": str(c.timezone)}
        shown = f"crontab {cron} in {c.timezone}"
    elif task.interval_id:
        seconds = task.interval.every * PERIOD_SECONDS[task.interval.period]
        if seconds < 1 or seconds != int(seconds):
            row.refused = f"an interval of {task.interval}: a job's interval is a whole number of seconds."
            return None
        spec = {"type": "interval", "every_seconds": int(seconds)}
        shown = f"interval every {int(seconds)} seconds"
    elif task.clocked_id:
        spec = {"type": "once", "run_at": task.clocked.clocked_time}
        shown = f"clocked at {task.clocked.clocked_time.isoformat()}"
    else:
        row.refused = "the row has no schedule."
        return None
    if task.one_off or spec["type"] == "once":
        run_at = once_at(task, spec, now)
        row.carried.append(f"{shown}, one-off: once at {run_at.isoformat()}")
        return {"type": "once", "run_at": run_at.isoformat()}
    row.carried.append(shown)
    return spec


def once_at(task, spec, now):
    """When beat sends a one-off row: at its start time when it has one (its last run is then taken
    as long past), else at the first slot after its last run or last change."""
    if spec["type"] == "once":
        return max(spec["run_at"], task.start_time) if task.start_time else spec["run_at"]
    if task.start_time:
        return task.start_time
    anchor = task.last_run_at or task.date_changed or now
    if spec["type"] == "interval":
        return anchor + timedelta(seconds=spec["every_seconds"])
    return schedules.next_cron_slot(spec["cron"], spec["timezone"], anchor)


def timing(task, entry, row, now):
    """``start_time``, ``expires``, ``expire_seconds`` and a one-off that already ran."""
    once = entry["schedule"]["type"] == "once"
    if task.one_off and task.total_run_count and task.enabled:
        entry["enabled"] = False
        row.carried.append("one-off that has run: imported paused, as beat disables it")
    if task.start_time and not once:
        if task.start_time > now:
            entry["enabled"] = False
            row.lost.append(
                f"start_time {task.start_time.isoformat()}: a job has no start date; imported paused: resume it then."
            )
        else:
            row.carried.append(f"start_time {task.start_time.isoformat()} (passed)")
    elif task.start_time:
        row.carried.append(f"start_time {task.start_time.isoformat()}: the once moment is no earlier")
    if task.expires:
        if task.expires <= now:
            entry["enabled"] = False
            row.carried.append(f"expired at {task.expires.isoformat()}: imported paused, as beat no longer sends it")
        elif once:
            run_at = entry["schedule"]["run_at"]
            deadline = int((task.expires - datetime.fromisoformat(run_at)).total_seconds())
            if deadline < 1:
                entry["enabled"] = False
                row.carried.append(f"expires {task.expires.isoformat()}, before its moment: imported paused")
            else:
                entry["start_deadline_seconds"] = deadline
                row.carried.append(f"expires {task.expires.isoformat()}: start deadline {deadline} seconds")
        else:
            row.lost.append(f"expires {task.expires.isoformat()}: a job has no end date; pause or delete it then.")
    elif task.expire_seconds:
        entry["start_deadline_seconds"] = task.expire_seconds
        row.carried.append(f"expire_seconds {task.expire_seconds}: start deadline {task.expire_seconds} seconds")


def delivery(task, entry, row):
    """Queue and priority; what decides a message's route otherwise has no equivalent."""
    if task.queue:
        entry["queue"] = task.queue
        row.carried.append(f"queue {task.queue}")
    if task.priority is not None:
        given = min(task.priority, MOST_URGENT)
        on_redis = settings.BROKER_KIND != "amqp"
        entry["priority"] = MOST_URGENT - given if on_redis else given
        row.carried.append(
            f"priority {task.priority} -> {entry['priority']}"
            + (" (Celery on Redis: 0 the most urgent; a job: 9)" if on_redis else "")
        )
    for name in ("exchange", "routing_key"):
        if value := getattr(task, name):
            row.lost.append(f"{name} {value}: a job's run is sent to its queue.")
    if (task.headers or "{}").strip() not in ("", "{}"):
        row.lost.append("headers: a job's messages carry the service's own.")
