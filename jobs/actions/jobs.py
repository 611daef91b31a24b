"""What a person does to a job, one function per action: create, edit, delete, clone, run now, pause,
resume, snooze and unsnooze its notifications, cancel a run, rerun a finished run (one, or many at
once), backfill; and ``rotate_secrets``.

Every interface calls these (the admin, the pages, the API, ``manage.py jobs|runs`` and ``jobs
apply``) with an ``Actor``: who acts, through which interface, from where. Each action checks the
command-job permission, makes the change and writes its audit entry, once, in one transaction.
Finding the job (and answering 404 for one the user cannot see) is the interface's part.

What a person can get wrong comes back as an ``ActionError`` with a message meant for them; each
interface turns it into its own answer (a 400, 403, 409 or 429, an admin message, a CommandError).
The quotas of users who are not staff and of teams are counted in ``quotas``.
"""

import copy
import getpass
import socket
from collections import Counter
from copy import copy as shallow_copy
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from audit import trail
from audit.models import Action, Source, Subject

from .. import lifecycle, parameters
from ..access import secrets
from ..definitions import bound_secrets, versions
from ..definitions import jobs as definitions
from ..kinds import running_elsewhere
from ..models import TERMINAL_STATUSES, Calendar, Job, Limit
from ..operations import backfill as backfills
from . import permissions, quotas
from .errors import ActionError
from .snapshot import created, diff, snapshot

COMMAND_JOBS_DENIED = permissions.COMMAND_JOBS_DENIED


@dataclass(frozen=True)
class Actor:
    """Who acts: a user (None on the command line), the interface (an ``audit.models.Source``),
    the address (the client's, or the host on the command line) and the name the trail shows."""

    user: object
    source: str
    address: str
    name: str

    @classmethod
    def of_request(cls, request, source):
        user = request.user
        if not user.is_authenticated:  # every interface asks for a login first
            raise ActionError("Log in first.", ActionError.FORBIDDEN)
        return cls(user, source, trail.client_address(request), user.get_username())

    @classmethod
    def command_line(cls, user=None):
        """``manage.py`` runs on a host of the service, with its settings and its database: whoever
        can run it could change the database directly, so it acts as the operator (no user: staff
        and every permission). With ``user`` (``--as USER``) it acts as that person: their jobs only,
        with their permissions. The trail names the user, or the OS user, and the host."""
        name = f"{user.get_username()} ({_os_user()})" if user is not None else _os_user()
        return cls(user, Source.CLI, socket.gethostname(), name)

    @property
    def sees_everything(self):
        return self.user is None or permissions.sees_everything(self.user)

    @property
    def interface(self):
        return Source(self.source).label


def _os_user():
    try:
        return f"{getpass.getuser()} (OS user)"
    except Exception:  # no login name in a container without a passwd entry
        return "unknown (OS user)"


# --- the command-job rule, in one place


def may_run_command_jobs(actor):
    """A command job runs a shell command on the workers: who may create, change, run or cancel one
    (``jobs.actions.permissions``: the run_command_jobs permission; the operator on the command line)."""
    return actor.user is None or permissions.may_run_command_jobs(actor.user)


def may_act_on(actor, job):
    return job.kind not in permissions.guarded_kinds() or may_run_command_jobs(actor)


def _check(actor, *kinds):
    if set(kinds) & permissions.guarded_kinds() and not may_run_command_jobs(actor):
        raise ActionError(COMMAND_JOBS_DENIED, ActionError.FORBIDDEN, fields={"kind": [COMMAND_JOBS_DENIED]})


def _record(actor, job, action, **fields):
    trail.record(job, action, actor.source, user=actor.user, actor_name=actor.name, address=actor.address,
                 **fields)


def record_version(actor, versioned, values, changes, detail="", created=False):
    """The next version of a job or a workflow (``values``: its snapshot as saved; ``versions``;
    ``created``: its first), by the actor."""
    versions.record(versioned, values, changes, user=actor.user, author_name=_author(actor), detail=detail,
                    created=created)


def _author(actor):
    """The name a version gives its author. Whoever sees the job (workflow) sees its versions, so the OS user and
    host of a command line stay in the audit trail (staff's): there, the ``--as`` user or "an operator"."""
    if actor.source != Source.CLI:
        return actor.name
    return actor.user.get_username() if actor.user is not None else "an operator"


# --- what a job names: a limit and calendars the actor may use (theirs, their team's, shared)


def _names_refusal(actor, job, stored=None):
    """An ActionError naming ``limit_key`` or ``calendars`` when ``job`` names a limit or a calendar
    the actor may not use, or None. Only what the change adds is checked (``stored``: the job before
    it), so a job keeps what it named before. Another's answers as one that does not exist would."""
    if actor.user is None or permissions.sees_everything(actor.user):
        return None
    errors = {}
    key = job.limit_key
    if key and key != getattr(stored, "limit_key", None) and isinstance(key, str) \
            and not permissions.owned_or_shared(Limit.objects.filter(key=key), actor.user).exists():
        errors["limit_key"] = [f"No limit has the key '{key[:100]}' that you may use: name your own limit, your "
                               "team's, or a shared one (/api/limits/)."]
    names = job.calendars if isinstance(job.calendars, list) else []
    added = {name for name in names if isinstance(name, str)} - set(getattr(stored, "calendars", None) or [])
    if added:
        usable = set(permissions.owned_or_shared(Calendar.objects.filter(name__in=added), actor.user)
                     .values_list("name", flat=True))
        if unknown := sorted(added - usable):
            shown = ", ".join(repr(name[:100]) for name in unknown[:5])
            errors["calendars"] = [f"No calendar is named {shown} that you may use: name your own calendars, your "
                                   "team's, or shared ones (/api/calendars/)."]
    if not errors:
        return None
    return ActionError("; ".join(f"{name}: {' '.join(texts)}" for name, texts in errors.items()),
                       ActionError.INVALID, fields=errors)


def _check_names(actor, job, stored=None):
    if refusal := _names_refusal(actor, job, stored):
        raise refusal


def _saved(job, schedule):
    try:
        return definitions.save_job(job, schedule)
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None


# --- defining jobs


def create(actor, job, schedule=None, detail=""):
    """Save a new job (``schedule``: a schedule object, applied when given). Its owner is the actor
    unless one is given (the command line without ``--as`` makes jobs of no one's: staff's)."""
    _check(actor, job.kind)
    quotas.check_interval(actor, schedule)
    quotas.check_bounds(actor, job)
    if job.owner_id is None and actor.user is not None:
        job.owner = actor.user
    _check_names(actor, job)
    with transaction.atomic():
        quotas.check_held(actor, Job, group=job.group)
        job.version = 1
        _saved(job, schedule)
        _record(actor, job, Action.CREATE, changes=created(job), detail=detail)
        record_version(actor, job, snapshot(job), None, detail, created=True)
    return job


def edit(actor, job, values=None, schedule=None, detail=""):
    """Set ``values`` ({field: value}) on a saved job and save it, applying ``schedule`` when given.
    Enabling a job without a new schedule starts it from now (as resume does). ``job`` may also
    carry its changes already (the admin's form sets them); the entry's diff is against the row."""
    values = values or {}
    with transaction.atomic():
        stored = (Job.objects.select_for_update(of=("self",))
                  .select_related("crontab", "interval", "clocked", "owner", "group").get(pk=job.pk))
        _check(actor, stored.kind, values.get("kind", job.kind))
        quotas.check_interval(actor, schedule, stored)
        for name, value in values.items():
            setattr(job, name, value)
        _check_bound_secrets(stored, job)
        quotas.check_bounds(actor, job, stored)
        if job.group_id != stored.group_id:
            quotas.check_team_held(actor, Job, job.group)
        _keep_streak(job, stored)
        _check_names(actor, job, stored)
        if schedule is None:
            definitions.follow_spread(job, stored)
            definitions.restart_if_reenabled(job, stored.enabled)
            definitions.restart_if_dst_policy_changed(job, stored)
            definitions.replan_if_days_changed(job, stored)
        _saved(job, schedule)
        if changes := diff(snapshot(stored), snapshot(job)):
            _record(actor, job, Action.CHANGE, changes=changes, detail=detail)
            record_version(actor, job, snapshot(job), changes, detail)
    return job


def _check_bound_secrets(stored, job):
    if refused := bound_secrets.refusals(stored, job):
        raise ActionError.invalid(ValidationError(refused))


def _keep_streak(job, stored):
    """What the service keeps on the job as its runs end (the failure streak, why it paused itself)
    and what the snooze action sets, and its version's number, as the locked row has them: ``job`` may
    have been read before a run's end, a snooze or another change moved them."""
    job.consecutive_failures, job.paused_reason = stored.consecutive_failures, stored.paused_reason
    job.snoozed_until, job.version = stored.snoozed_until, stored.version


def delete(actor, job, detail=""):
    _check(actor, job.kind)
    try:
        with transaction.atomic():
            _record(actor, job, Action.DELETE, changes=diff(snapshot(job), None), detail=detail)
            job.delete()
    except ProtectedError as exc:
        names = sorted({str(getattr(obj, "workflow", obj)) for obj in exc.protected_objects})
        raise ActionError(f"The job {job.name} is used by the workflow(s) {', '.join(names)}: remove it from "
                          "them first.", ActionError.CONFLICT) from None


def clone(actor, job):
    """A disabled copy of ``job`` named "<name> (copy)" (or "(copy 2)"…), sharing its schedule rows.
    The copy is the actor's, counted against their quotas: it keeps the job's team only when the
    actor is in it, and none of its secret values (they were given for the job, not for the copy)."""
    _check(actor, job.kind)
    quotas.check_interval(actor, definitions.schedule_of(job))
    quotas.check_bounds(actor, job)
    with transaction.atomic():
        copy = Job.objects.get(pk=job.pk)
        copy.owner = actor.user  # the command line without --as: no one's (staff's), as create makes them
        if copy.group_id is not None and not (actor.sees_everything
                                              or actor.user.groups.filter(pk=copy.group_id).exists()):
            copy.group = None
        quotas.check_held(actor, Job, group=copy.group)
        name, n = f"{job.name} (copy)", 1
        while Job.objects.filter(name=name).exists():
            n += 1
            name = f"{job.name} (copy {n})"
        copy.pk = copy.id = None
        copy._state.adding = True
        copy.name, copy.enabled, copy.last_run, copy.snoozed_until = name, False, None, None
        copy.ping_key = copy.ping_check_from = None  # a check-in's copy gets a ping URL of its own
        for field in secrets.FIELDS:
            setattr(copy, field, {})
        _check_names(actor, copy)
        copy.version = 1
        _saved(copy, None)
        _record(actor, copy, Action.CREATE, changes=created(copy), detail=f"cloned from {job.name}")
        record_version(actor, copy, snapshot(copy), None, f"cloned from {job.name}", created=True)
    return copy


# --- many jobs at once (jobs apply)


def _entry(actor, job, action, **fields):
    return trail.entry_of(job, action, actor.source, user=actor.user, actor_name=actor.name, address=actor.address,
                          **fields)


def _refusals(actor, kinds_of):
    """{index: ActionError} of the jobs whose kinds (``kinds_of``: {index: kinds}) the actor may not touch."""
    refused = {}
    for index, kinds in kinds_of.items():
        try:
            _check(actor, *kinds)
        except ActionError as exc:
            refused[index] = exc
    return refused


def _with(job, values):
    """``job`` as ``values`` would make it, without changing it."""
    changed = copy.copy(job)
    for name, value in values.items():
        setattr(changed, name, value)
    return changed


def save_many(actor, new, changed, checked_fields=(), detail="", now=None):
    """``create`` for each of ``new`` ([(job, schedule or None)]) and ``edit`` for each of ``changed``
    ([(job, values, schedule or None)]), at once: the same permission checks, owners and validation,
    an audit entry per changed job and one for all the new ones, the rows written in bulk (``definitions.save_jobs``: ``checked_fields``
    are those the caller has checked as the API does; ``now``: the moment the first slots are
    computed from, one for all the calls of one file). Returns {("new" or "changed", index):
    ActionError}; nothing is saved when there is any."""
    refused = {("new", i): exc for i, exc in _refusals(actor, {i: [job.kind] for i, (job, _) in enumerate(new)}).items()}
    with transaction.atomic():
        stored = {}
        ids = [job.pk for job, _, _ in changed]
        for start in range(0, len(ids), 10000):
            stored.update(Job.objects.select_for_update(of=("self",))
                          .select_related("crontab", "interval", "clocked", "owner", "group")
                          .in_bulk(ids[start:start + 10000]))
        gone = {("changed", i): ActionError(f"The job {job.name} was deleted meanwhile.", ActionError.CONFLICT)
                for i, (job, _, _) in enumerate(changed) if job.pk not in stored}
        refused.update(gone)
        refused.update({("changed", i): exc for i, exc in _refusals(actor, {
            i: [stored[job.pk].kind, values.get("kind", job.kind)] for i, (job, values, _) in enumerate(changed)
            if job.pk in stored}).items()})
        refused.update({("new", i): exc for i, (job, schedule) in enumerate(new)
                        if (exc := quotas.interval_refusal(actor, schedule) or quotas.bounds_refusal(actor, job))})
        refused.update({("changed", i): exc for i, (job, values, schedule) in enumerate(changed)
                        if job.pk in stored and (exc := quotas.interval_refusal(actor, schedule, stored[job.pk])
                                                 or _bounds_refusal_of_change(actor, job, values, stored[job.pk]))})
        refused.update({("new", i): exc for i, (job, _) in enumerate(new) if (exc := _names_refusal(actor, job))})
        refused.update({("changed", i): exc for i, (job, values, _) in enumerate(changed) if job.pk in stored
                        and (exc := _names_refusal(actor, _with(job, values), stored[job.pk]))})
        if new and (over := quotas.user_held_refusal(actor, Job, len(new))
                    or quotas.team_held_refusal(actor, Job, _teams_joined(new, changed, stored))):
            refused.setdefault(("new", 0), over)  # the whole file is refused: said once
        if refused:
            return refused
        items, update_fields = [], set()
        for job, schedule in new:
            if job.owner_id is None and actor.user is not None:
                job.owner = actor.user
            job.version = 1
            items.append((job, schedule))
        for i, (job, values, _) in enumerate(changed):
            for name, value in values.items():
                setattr(job, name, value)
            if moved := bound_secrets.refusals(stored[job.pk], job):
                refused[("changed", i)] = ActionError.invalid(ValidationError(moved))
        if refused:
            return refused
        for job, values, schedule in changed:
            update_fields.update(values)
            _keep_streak(job, stored[job.pk])
            if schedule is None:
                definitions.follow_spread(job, stored[job.pk])
                definitions.restart_if_reenabled(job, stored[job.pk].enabled)
                definitions.restart_if_dst_policy_changed(job, stored[job.pk])
                definitions.replan_if_days_changed(job, stored[job.pk])
            items.append((job, schedule))
        try:
            invalid = definitions.save_jobs(items, checked_fields, update_fields, now=now)
        except ValidationError as exc:
            raise ActionError.invalid(exc) from None
        if invalid:
            return {("new", i) if i < len(new) else ("changed", i - len(new)): ActionError.invalid(exc)
                    for i, exc in invalid.items()}
        # The jobs created: one entry naming them all (what each holds is its row); a change or a
        # delete has an entry per job, with what changed.
        names = [job.name for job, _ in new]
        entries = [_entry(actor, None, Action.CREATE, name=", ".join(names), changes={"created": names},
                          detail=f"{detail}: {len(names)} job(s) created")] if new else []
        saved = []
        for job, _, _ in changed:
            values = snapshot(job)
            if changes := diff(snapshot(stored[job.pk]), values):
                entries.append(_entry(actor, job, Action.CHANGE, changes=changes, detail=detail))
                saved.append((job, values, changes))
        trail.record_many(entries)
        by = {"user": actor.user, "author_name": _author(actor), "detail": detail}
        versions.record_many([(job, snapshot(job), None) for job, _ in new], created=True, **by)
        versions.record_many(saved, **by)
    return {}


def _bounds_refusal_of_change(actor, job, values, stored):
    """``quotas.bounds_refusal`` of ``job`` once ``values`` are set (they are set after every check)."""
    changed = shallow_copy(job)
    for name, value in values.items():
        setattr(changed, name, value)
    return quotas.bounds_refusal(actor, changed, stored)


def _teams_joined(new, changed, stored):
    """{group: how many jobs join it} of the new jobs and those changed into another group."""
    joined = Counter(job.group for job, _ in new if job.group_id is not None)
    joined.update(values["group"] for job, values, _ in changed
                  if values.get("group") is not None and job.pk in stored and values["group"].pk != stored[job.pk].group_id)
    return joined


def delete_many(actor, jobs, detail=""):
    """``delete`` for each of ``jobs`` at once: {index: ActionError} of those refused, and nothing
    deleted when there is any."""
    refused = _refusals(actor, {i: [job.kind] for i, job in enumerate(jobs)})
    if refused:
        return refused
    try:
        with transaction.atomic():
            trail.record_many([_entry(actor, job, Action.DELETE, changes=diff(snapshot(job), None), detail=detail)
                               for job in jobs])
            ids = [job.pk for job in jobs]
            for start in range(0, len(ids), 10000):
                Job.objects.filter(pk__in=ids[start:start + 10000]).delete()
    except ProtectedError:  # which job, and the words for it, from the one-by-one path
        with transaction.atomic():
            found = {}
            for i, job in enumerate(jobs):
                try:
                    with transaction.atomic():
                        delete(actor, job, detail=detail)
                except ActionError as exc:
                    found[i] = exc
            transaction.set_rollback(True)
        return found
    return {}


# --- acting on jobs and runs


def resolved_params(job, given):
    """The values a run of ``job`` records, from ``given`` ({name: value} or None: the defaults);
    an ActionError naming each parameter and its rule, before anything is queued."""
    try:
        return parameters.resolve(job.parameters, given)
    except ValidationError as exc:
        raise ActionError.invalid(exc) from None


def run_now(actor, job, params=None):
    """A manual run of the job, queued at once, with ``params`` (values of the job's parameters,
    checked; the defaults fill the rest). The entry records the values."""
    _check(actor, job.kind)
    _check_runs_here(job)
    values = resolved_params(job, params)
    with transaction.atomic():
        quotas.check_runs(actor, job.group)
        run = lifecycle.create_run(job, user=actor.user, params=values)
        _record(actor, job, Action.RUN_NOW, run=run, changes={"params": [None, values]} if values else None)
    return run


def _check_runs_here(job):
    if job.kind in running_elsewhere():
        raise ActionError(f"{job.name} runs elsewhere (a {job.kind} job): its runs are reported by pinging "
                          f"its ping_url, the service does not run it.", ActionError.CONFLICT)


def pause(actor, job):
    return _switch(actor, job, definitions.pause, Action.PAUSE)


def resume(actor, job):
    return _switch(actor, job, definitions.resume, Action.RESUME)


def _switch(actor, job, switch, action):
    _check(actor, job.kind)
    with transaction.atomic():
        switch(job)
        _record(actor, job, action)
    return job


SNOOZE_MAX_DAYS = 90


def snooze(actor, job, until):
    """No notification of ``job`` until ``until`` (an aware datetime, in the future, at most
    SNOOZE_MAX_DAYS ahead): what its runs would send is recorded, not sent (notifications.outbox).
    Snoozing a snoozed job moves the end."""
    _check(actor, job.kind)
    now = timezone.now()
    if not isinstance(until, datetime) or timezone.is_naive(until):
        refused = "A time with its offset, such as 2026-12-01T08:00:00+01:00."
    elif until <= now:
        refused = f"Must be in the future (it is {now.isoformat(timespec='seconds')} now)."
    elif until > now + timedelta(days=SNOOZE_MAX_DAYS):
        refused = f"At most {SNOOZE_MAX_DAYS} days ahead; pause the job, or remove its rules, to stop its alerts longer."
    else:
        refused = None
    if refused:
        raise ActionError(f"until: {refused}", ActionError.INVALID, fields={"until": [refused]})
    return _set_snooze(actor, job, until, Action.SNOOZE)


def unsnooze(actor, job):
    """Notify about ``job`` again from now on."""
    _check(actor, job.kind)
    return _set_snooze(actor, job, None, Action.UNSNOOZE)


def _set_snooze(actor, job, until, action):
    with transaction.atomic():
        before = Job.objects.select_for_update().values_list("snoozed_until", flat=True).get(pk=job.pk)
        Job.objects.filter(pk=job.pk).update(snoozed_until=until)
        job.snoozed_until = until
        if before != until:
            _record(actor, job, action, changes={"snoozed_until": [before and before.isoformat(),
                                                                   until and until.isoformat()]})
    return job


def cancel(actor, run):
    """Cancel a run that has not finished; False (and no entry) when it had already finished."""
    _check(actor, run.job.kind)
    with transaction.atomic():
        cancelled = lifecycle.cancel(run, reason=f"Cancelled by {actor.name} from the {actor.interface}")
        if cancelled:
            _record(actor, run.job, Action.CANCEL, run=run)
    return cancelled


def rerun(actor, run):
    """Run a finished run again as itself (``lifecycle.rerun``: the same slot and idempotency key, its
    next attempt, its earlier attempts kept), counted as a run the actor started. A CONFLICT (409)
    while the run is queued or running."""
    _check(actor, run.job.kind)
    _check_runs_here(run.job)
    with transaction.atomic():
        previous = run.status
        if previous not in TERMINAL_STATUSES:
            raise ActionError(f"Run #{run.pk} is {previous}: only a finished run can be rerun.", ActionError.CONFLICT)
        quotas.check_runs(actor, run.job.group)
        if not lifecycle.rerun(run, user=actor.user):
            raise ActionError(f"Run #{run.pk} was started again meanwhile: it is no longer finished.",
                              ActionError.CONFLICT)
        _record(actor, run.job, Action.RERUN, run=run,
                detail=f"run #{run.pk} rerun as attempt {run.attempt} (it had {previous})")
    return run


def rerun_many(actor, runs, dry_run=False):
    """``rerun`` for each finished run of ``runs`` (a query, which the interface has narrowed to
    those the actor may see), at most JOBS_RERUN_MAX_RUNS of them: (the runs rerun, or with
    ``dry_run`` those that would be; those that had started again meanwhile). Refused whole, with
    nothing rerun, past that bound, when a run's job is one the actor may not act on, or past a
    quota of runs (counting them all, and each team's for its own jobs)."""
    bound = settings.JOBS_RERUN_MAX_RUNS
    found = list(runs.filter(status__in=TERMINAL_STATUSES).select_related("job", "job__group")
                 .order_by("scheduled_for", "id")[:bound + 1])
    if len(found) > bound:
        raise ActionError(f"More than {bound} finished runs match; at most {bound} are rerun at once "
                          "(JOBS_RERUN_MAX_RUNS): narrow the range.")
    _check(actor, *{run.job.kind for run in found})
    found = [run for run in found if run.job.kind not in running_elsewhere()]  # a check-in's runs are its pings'
    if dry_run or not found:
        return found, []
    with transaction.atomic():
        quotas.check_runs(actor, None, adding=len(found))
        teams = Counter(run.job.group for run in found if run.job.group_id is not None)
        for group, count in teams.items():
            quotas.check_runs(actor, group, adding=count)
        done, moved = [], []
        for run in found:
            previous = run.status
            if lifecycle.rerun(run, user=actor.user):
                done.append(run)
                _record(actor, run.job, Action.RERUN, run=run,
                        detail=f"run #{run.pk} rerun as attempt {run.attempt} (it had {previous}), one of many")
            else:
                moved.append(run)
    return done, moved


def backfill(actor, job, start, end, dry_run=False, params=None):
    """Create (or, with ``dry_run``, only list) the runs of the job's past slots in [start, end), as
    many as the actor's backfill quota leaves (``quotas.backfill_runs_left``), refused at their quota of
    runs (``quotas.check_runs``); each run gets ``params``
    (checked, the defaults filling the rest), and the entry records them."""
    _check(actor, job.kind)
    _check_runs_here(job)
    values = resolved_params(job, params)
    with transaction.atomic():
        if not dry_run:
            quotas.check_runs(actor, job.group)
        try:
            found = backfills.backfill(job, start, end, user=actor.user, dry_run=dry_run,
                                       runs_left=None if dry_run else quotas.backfill_runs_left(actor), params=values)
        except ValidationError as exc:
            raise ActionError.invalid(exc) from None
        if found.created:
            _record(actor, job, Action.BACKFILL, changes={"params": [None, values]} if values else None, detail=(
                f"{len(found.created)} run(s) for the slots from {start.isoformat()} to {end.isoformat()} "
                f"({len(found.existing)} already had a run)"))
    return found


# --- the secrets of every app


def rotate_secrets(actor):
    """Encrypt every stored secret value again with the first key of JOBS_SECRETS_KEYS: the jobs'
    and those of the apps registered with ``secrets.register_holder`` (channels), all or none.
    Returns {what: rows changed}; an ActionError, with nothing changed, when a value cannot be
    decrypted with any key."""
    if secrets.fernet() is None:
        raise ActionError("JOBS_SECRETS_KEYS is not set.")
    counts = {}
    with transaction.atomic():
        try:
            counts["jobs"] = _rotate_job_secrets()
            for name, rotate_all in secrets.HOLDERS.items():
                counts[name] = rotate_all()
        except secrets.SecretsUnavailable as exc:
            raise ActionError(f"{exc} Nothing was changed.") from None
        trail.record_about(Subject.SECRETS, "JOBS_SECRETS_KEYS", Action.ROTATE, actor.source, actor_name=actor.name,
                           user=actor.user, address=actor.address,
                           detail="encrypted again with the first key: " + ", ".join(
                               f"{count} {name}" for name, count in counts.items()))
    return counts


def _rotate_job_secrets():
    count = 0
    for job in Job.objects.select_for_update().only("pk", *secrets.FIELDS).order_by("pk"):
        values = {name: getattr(job, name) for name in secrets.FIELDS}
        if not any(values.values()):
            continue
        try:
            rotated = {name: secrets.rotate(value) for name, value in values.items()}
        except secrets.SecretsUnavailable as exc:
            raise secrets.SecretsUnavailable(f"job {job.pk}: {exc}") from None
        Job.objects.filter(pk=job.pk).update(**rotated)
        count += 1
    return count
