"""Quotas: what one user who is not staff, and one team, may hold and start, counted the same way
whichever interface acts (the actions call these).

- What a user holds: jobs (JOBS_MAX_JOBS_PER_USER) and workflows (JOBS_MAX_WORKFLOWS_PER_USER) they
  own; a team (a Django group, ``TeamQuota``) its jobs and workflows together. Over one: a 400.
- How often a schedule runs (JOBS_MIN_INTERVAL_SECONDS_NON_STAFF), a job's or a workflow's; and the
  bounds of a job's retries, timeouts and priority (``BOUNDS``). Over one: a 400 naming the field.
- What a user starts: runs started in the last hour (run now, backfill, workflow runs and re-runs:
  the runs that name them in ``triggered_by``; reruns of finished runs: the ``RunRerun`` rows that
  name them in ``by``), runs in flight (not ended) of their jobs or started
  by them, and the same for a team's jobs. Over one: ``ActionError.TOO_MANY``, a 429.

Staff, superusers and the command line without ``--as`` have no quotas; a setting of 0 (or a team's
empty field) turns one off. Each refusal names the quota and its value. Staff set a team's quotas
with ``save_team_quota`` (the admin, ``/api/quotas/``), which writes the audit entry.
"""

import functools
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import connection, transaction

from audit import trail
from audit.models import Action, Subject

from ..choices import ACTIVE_PHASES
from ..definitions import jobs as definitions
from ..models import ACTIVE_STATUSES, Job, JobRun, RunRerun, RunTrigger, TeamQuota
from ..timing import clock, schedules
from . import permissions
from .errors import ActionError

# What a user and a team hold, by model name: the user's setting, the team's quota field.
HELD = {"job": ("JOBS_MAX_JOBS_PER_USER", "max_jobs"), "workflow": ("JOBS_MAX_WORKFLOWS_PER_USER", "max_workflows")}


def has_quotas(actor):
    return actor.user is not None and not permissions.sees_everything(actor.user)


def _hold(actor):
    """Lock the user's row until the transaction ends: two requests of one user are counted one
    after the other, so together they cannot pass a quota each passes alone."""
    get_user_model().objects.select_for_update().filter(pk=actor.user.pk).exists()


def _team_quota(group):
    """The team's quotas, its row locked (two members are counted one after the other), or None."""
    if group is None:
        return None
    return TeamQuota.objects.filter(group=group).order_by().select_for_update().first()


# --- what is held: jobs and workflows


def held_refusal(actor, model, adding=1, group=None):
    """None, or the error when ``adding`` more rows of ``model`` (Job or Workflow) owned by the actor,
    of the team ``group``, would pass the user's quota or the team's."""
    return user_held_refusal(actor, model, adding) or team_held_refusal(actor, model, {group: adding})


def user_held_refusal(actor, model, adding):
    if not has_quotas(actor):
        return None
    noun = model._meta.model_name
    setting = HELD[noun][0]
    if not (limit := getattr(settings, setting)):
        return None
    _hold(actor)
    owned = model.objects.filter(owner=actor.user).count()
    if owned + adding <= limit:
        return None
    return _held_error(f"You own {owned} {noun}(s) and may own at most {limit} ({setting})", adding)


def team_held_refusal(actor, model, adding):
    """None, or the error when more rows of ``model`` in teams (``adding``: {group or None: how many})
    would pass a team's quota."""
    if not has_quotas(actor):
        return None
    noun = model._meta.model_name
    field = HELD[noun][1]
    for group, count in adding.items():
        quota = _team_quota(group)
        if quota is None or (limit := getattr(quota, field)) is None:
            continue
        owned = model.objects.filter(group=group).count()
        if owned + count > limit:
            return _held_error(f"The team {group.name} has {owned} {noun}(s) and may have at most {limit} "
                               f"(its team quota {field})", count)
    return None


def check_team_held(actor, model, group):
    if refused := team_held_refusal(actor, model, {group: 1}):
        raise refused


def _held_error(said, adding):
    message = f"{said}: " + (f"{adding} more would pass it." if adding > 1 else
                             "delete one first, or ask an administrator.")
    return ActionError(message, fields={NON_FIELD_ERRORS: [message]})


def check_held(actor, model, adding=1, group=None):
    if refused := held_refusal(actor, model, adding, group):
        raise refused


# --- what is defined: schedules and a job's fields


def interval_refusal(actor, schedule, stored=None, noun="jobs"):
    """None, or the error when a new ``schedule`` (a schedule object) runs more often than
    JOBS_MIN_INTERVAL_SECONDS_NON_STAFF allows; a schedule kept as it was is not checked again."""
    shortest = settings.JOBS_MIN_INTERVAL_SECONDS_NON_STAFF
    if not shortest or schedule is None or not has_quotas(actor):
        return None
    if stored is not None and schedule == definitions.schedule_of(stored):
        return None
    key, every = None, None
    if schedule["type"] == "interval":
        key, every = "every_seconds", schedule["every_seconds"]
    elif schedule["type"] == "cron" and shortest > 60:  # a cron expression runs at most once a minute
        slots = schedules.cron_slots(schedule["cron"], schedule["timezone"], clock.now(), 60)
        key, every = "cron", min((b - a).total_seconds() for a, b in zip(slots, slots[1:], strict=False))
    if every is None or every >= shortest:
        return None
    message = (f"Runs every {every:g} s; {noun} of users who are not staff run at most every {shortest} s "
               "(JOBS_MIN_INTERVAL_SECONDS_NON_STAFF).")
    return ActionError(f"{key}: {message}", fields={key: [message]})


def check_interval(actor, schedule, stored=None, noun="jobs"):
    if refused := interval_refusal(actor, schedule, stored, noun):
        raise refused


# A job's fields bounded for users who are not staff: (field, setting, whether the setting is the
# largest value allowed or the smallest).
BOUNDS = (
    ("max_retries", "JOBS_MAX_RETRIES_NON_STAFF", "most"),
    ("timeout_seconds", "JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF", "most"),
    ("sla_seconds", "JOBS_MAX_TIMEOUT_SECONDS_NON_STAFF", "most"),
    ("priority", "JOBS_MAX_PRIORITY_NON_STAFF", "most"),
    ("retry_backoff_seconds", "JOBS_MIN_RETRY_BACKOFF_SECONDS_NON_STAFF", "least"),
)


def bounds_refusal(actor, job, stored=None):
    """None, or the error naming each field of ``job`` past its bound for users who are not staff; a
    value kept as ``stored`` has it is not checked again (staff may have set it)."""
    if not has_quotas(actor):
        return None
    fields = {}
    for name, setting, side in BOUNDS:
        value, bound = getattr(job, name), getattr(settings, setting)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue  # no value, or not a number: the model's own checks answer
        if stored is not None and getattr(stored, name) == value:
            continue
        if value > bound if side == "most" else value < bound:
            fields[name] = [f"At {side} {bound:g} for users who are not staff ({setting})."]
    if not fields:
        return None
    return ActionError("; ".join(f"{name}: {messages[0]}" for name, messages in fields.items()), fields=fields)


def check_bounds(actor, job, stored=None):
    if refused := bounds_refusal(actor, job, stored):
        raise refused


# --- what is started: runs


def runs_refusal(actor, group=None, adding=1):
    """None, or the error (TOO_MANY: a 429) when ``adding`` more runs started by the actor, of a job
    or workflow of the team ``group``, would pass a quota of runs: started in the last hour
    (JOBS_MAX_RUNS_PER_HOUR_PER_USER) or in flight (JOBS_MAX_RUNS_IN_FLIGHT_PER_USER), the user's or
    the team's.

    Every run now pays for this: one statement (two when the team has quotas of runs), each count
    read from an index and stopping at its quota, its text written once (``_run_counts``). Nothing
    is locked: two runs started at the same moment may pass a quota by one, which costs less than
    making each run now of a user wait for the other."""
    if not has_quotas(actor):
        return None
    per_hour, in_flight = settings.JOBS_MAX_RUNS_PER_HOUR_PER_USER, settings.JOBS_MAX_RUNS_IN_FLIGHT_PER_USER
    started, flying, team_hour, team_flight = _run_counts(
        "user", [actor.user.pk, per_hour, actor.user.pk, per_hour, *ACTIVE_PHASES, *_ACTIVE, actor.user.pk,
                 actor.user.pk, in_flight, getattr(group, "pk", None), getattr(group, "pk", None)])
    if per_hour and started + adding > per_hour:
        return _too_many(f"You started {started} run(s) in the last hour; at most {per_hour} per hour "
                         "(JOBS_MAX_RUNS_PER_HOUR_PER_USER).")
    if in_flight and flying + adding > in_flight:
        return _too_many(f"{flying} run(s) of your jobs or started by you have not ended; at most {in_flight} at once "
                         "(JOBS_MAX_RUNS_IN_FLIGHT_PER_USER).")
    if team_hour is None and team_flight is None:
        return None
    started, flying = _run_counts("team", [group.pk, group.pk, team_hour or 0, group.pk, group.pk, team_hour or 0,
                                           *ACTIVE_PHASES, *_ACTIVE, group.pk, team_flight or 0])
    if team_hour is not None and started + adding > team_hour:
        return _too_many(f"The team {group.name}'s members started {started} run(s) of its jobs in the last hour; "
                         f"at most {team_hour} per hour (its team quota max_runs_per_hour).")
    if team_flight is not None and flying + adding > team_flight:
        return _too_many(f"{flying} run(s) of the team {group.name}'s jobs have not ended; at most {team_flight} at once "
                         "(its team quota max_runs_in_flight).")
    return None


_ACTIVE = sorted(str(status) for status in ACTIVE_STATUSES)


@functools.cache
def _run_statement(which, vendor):
    """The text of run now's counts, made once: building them through the ORM cost more than running
    them. Each count stops at its LIMIT, the quota (0: off). ``phase IN`` reads run_active_idx (the
    runs not ended, whoever's; ``status IN`` as the status lookups add it, jobs.models.run); the runs
    started since an hour ago by the database's clock (jobs.timing.clock; SQLite's is the host's)
    read run_triggered_by_recent_idx (triggered_by, created_at), the reruns rerun_by_recent_idx."""
    runs, jobs, quotas = JobRun._meta.db_table, Job._meta.db_table, TeamQuota._meta.db_table
    reruns = RunRerun._meta.db_table
    since = ("STATEMENT_TIMESTAMP() - INTERVAL '1 hour'" if vendor == "postgresql"
             else "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-1 hour')")
    members = get_user_model().groups.through._meta.db_table
    active = (f"r.phase IN ({', '.join(['%s'] * len(ACTIVE_PHASES))}) "
              f"AND r.status IN ({', '.join(['%s'] * len(_ACTIVE))})")
    if which == "user":
        return (f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {runs} WHERE triggered_by_id = %s AND created_at >= {since} "
                f"LIMIT %s) AS started) + (SELECT COUNT(*) FROM (SELECT 1 FROM {reruns} WHERE by_id = %s "
                f"AND created_at >= {since} LIMIT %s) AS rerun), "
                f"(SELECT COUNT(*) FROM (SELECT 1 FROM {runs} r INNER JOIN {jobs} j ON j.id = r.job_id WHERE {active} "
                f"AND (j.owner_id = %s OR r.triggered_by_id = %s) LIMIT %s) AS flying), "
                f"(SELECT max_runs_per_hour FROM {quotas} WHERE group_id = %s), "
                f"(SELECT max_runs_in_flight FROM {quotas} WHERE group_id = %s)")
    return (f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {runs} r INNER JOIN {jobs} j ON j.id = r.job_id "
            f"WHERE r.triggered_by_id IN (SELECT user_id FROM {members} WHERE group_id = %s) AND r.created_at >= {since} "
            f"AND j.group_id = %s LIMIT %s) AS started) + "
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {reruns} x INNER JOIN {runs} r ON r.id = x.run_id "
            f"INNER JOIN {jobs} j ON j.id = r.job_id WHERE x.by_id IN (SELECT user_id FROM {members} WHERE group_id = %s) "
            f"AND x.created_at >= {since} AND j.group_id = %s LIMIT %s) AS rerun), "
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {runs} r INNER JOIN {jobs} j ON j.id = r.job_id WHERE {active} "
            f"AND j.group_id = %s LIMIT %s) AS flying)")


def _run_counts(which, params):
    with connection.cursor() as cursor:
        cursor.execute(_run_statement(which, connection.vendor), params)
        return cursor.fetchone()


def _too_many(message):
    return ActionError(message, ActionError.TOO_MANY)


def check_runs(actor, group=None, adding=1):
    if refused := runs_refusal(actor, group, adding):
        raise refused


def backfill_runs_left(actor):
    """How many runs the actor may still create by backfill today (None: no limit): at most
    JOBS_MAX_BACKFILL_RUNS_PER_DAY in any 24 hours."""
    limit = settings.JOBS_MAX_BACKFILL_RUNS_PER_DAY
    if not limit or not has_quotas(actor):
        return None
    _hold(actor)
    made = JobRun.objects.filter(triggered_by=actor.user, trigger=RunTrigger.BACKFILL,
                                 created_at__gte=clock.now() - timedelta(days=1)).count()
    return max(limit - made, 0)


# --- a team's quotas, set by staff


TEAM_FIELDS = ("max_jobs", "max_workflows", "max_runs_per_hour", "max_runs_in_flight")
STAFF_ONLY = "Only staff may set a team's quotas."


def may_set_team_quotas(actor):
    return actor.user is None or permissions.sees_everything(actor.user)


def visible_team_quotas(user):
    """Staff see every team's quotas; anyone else their own teams'."""
    found = TeamQuota.objects.select_related("group")
    return found if permissions.sees_everything(user) else found.filter(group__in=user.groups.all())


def _snapshot(quota):
    return {name: getattr(quota, name) for name in TEAM_FIELDS} if quota is not None else {}


def save_team_quota(actor, quota, values=None):
    """Create or change a team's quotas (``values``: {field: value}, or set on ``quota`` already, as
    the admin's form does), with its audit entry (subject "quota", named by the team)."""
    if not may_set_team_quotas(actor):
        raise ActionError(STAFF_ONLY, ActionError.FORBIDDEN)
    with transaction.atomic():
        stored = TeamQuota.objects.select_for_update().filter(pk=quota.pk).first() if quota.pk else None
        for name, value in (values or {}).items():
            setattr(quota, name, value)
        try:
            quota.full_clean()
        except ValidationError as exc:
            raise ActionError.invalid(exc) from None
        quota.save()
        before, after = _snapshot(stored), _snapshot(quota)
        if changes := {name: [before.get(name), after[name]] for name in TEAM_FIELDS if before.get(name) != after[name]}:
            _record(actor, quota, Action.CREATE if stored is None else Action.CHANGE, changes)
    return quota


def delete_team_quota(actor, quota):
    if not may_set_team_quotas(actor):
        raise ActionError(STAFF_ONLY, ActionError.FORBIDDEN)
    with transaction.atomic():
        _record(actor, quota, Action.DELETE, {name: [value, None] for name, value in _snapshot(quota).items()})
        quota.delete()


def _record(actor, quota, action, changes):
    trail.record_about(Subject.QUOTA, quota.group.name, action, actor.source, actor_name=actor.name, user=actor.user,
                       address=actor.address, changes=changes)
