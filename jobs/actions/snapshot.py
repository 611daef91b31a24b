"""A job's defining fields as JSON values, and the difference of two such snapshots: what an audit
entry records of a create, a change or a delete.

Values of the fields that hold secrets, or may (``job_fields.PRIVATE_VALUES``: a command's environment,
an HTTP call's headers; and any kind's secret fields), are never written to the trail: the diff names
the keys, and marks a key whose value changed.
"""

from datetime import datetime

from .. import kinds
from ..definitions import fields as job_fields
from ..definitions.jobs import schedule_of
from ..models import Job

HIDDEN = "•••"
TRACKED = list(job_fields.EDITABLE)


SCALARS = (str, int, float, bool, type(None))


def _plain(value):
    if type(value) in SCALARS:  # most of a job's values (a bulk save snapshots every job)
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def snapshot(job):
    """The job's defining fields as JSON values (the schedule as the API's schedule object)."""
    values, loaded = {}, job.__dict__  # a loaded field's value, without its descriptor (a bulk save snapshots every job)
    for name in TRACKED:
        if name == "schedule":
            values[name] = _plain(schedule_of(job))
        elif name == "owner":
            values[name] = job.owner.get_username() if job.owner_id else None
        elif name == "group":
            values[name] = job.group.name if job.group_id else None
        else:
            values[name] = _plain(loaded[name] if name in loaded else getattr(job, name))
    return values


# What a create always records, default or not.
ALWAYS = ("name", "kind", "target", "schedule")


def created(job):
    """What an audit entry records of a new job: the fields it was given other than the model's
    defaults (a command job's entry does not list the HTTP fields it never had)."""
    values = snapshot(job)
    return diff(None, {name: value for name, value in values.items()
                       if name in ALWAYS or value != _plain(Job._meta.get_field(name).get_default())})


def diff(before, after):
    """{field: [old, new]} of the fields that differ; ``before`` or ``after`` may be None (create,
    delete). Secret fields show their keys only."""
    before, after = before or {}, after or {}
    changes, unaudited = {}, {*job_fields.PRIVATE_VALUES, *kinds.secret_fields()}
    for name in TRACKED:
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if name in unaudited:
            old, new = _hide(old, new)
        changes[name] = [old, new]
    return changes


def _hide(old, new):
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    hidden_old = {key: HIDDEN for key in old}
    hidden_new = {key: f"{HIDDEN} (changed)" if key in old and old[key] != new[key] else HIDDEN for key in new}
    return hidden_old or None, hidden_new or None


def shown(values):
    """A snapshot as it may be shown: the private fields by their keys only."""
    unaudited = {*job_fields.PRIVATE_VALUES, *kinds.secret_fields()}
    return {name: _hide(value, value)[1] if name in unaudited else value for name, value in values.items()}
