"""What every action on a row a user owns and may share with a team checks (limits, calendars,
channels, rules: ``jobs.actions.permissions.owned_or_shared``): whether the actor may change it, and
whether they may give it its group and ``shared`` flag (``changing``: both, on the locked row); and
the owner a new one gets."""

from . import permissions
from .errors import ActionError


def may_change(actor, row=None):
    """Whether ``actor`` may change or delete ``row`` (None: make a new one)."""
    return row is None or permissions.may_change_owned(actor.user, row)


def check_change(actor, row, refused):
    """Refuse (forbidden, ``refused`` saying why) a change of ``row`` the actor may not make."""
    if not may_change(actor, row):
        raise ActionError(refused, ActionError.FORBIDDEN)


def check_ownership(actor, row, stored=None):
    """Refuse (invalid, per field) a group or ``shared`` flag the actor may not give ``row``
    (``stored``: the row before the change)."""
    if errors := permissions.ownership_refusal(actor.user, row.group, getattr(row, "shared", False), stored):
        raise ActionError("; ".join(m for ms in errors.values() for m in ms), ActionError.INVALID, fields=errors)


def changing(actor, row, values, refused):
    """The stored row of ``row`` locked (inside the caller's transaction), once the actor may change
    it; ``values`` ({field: value}, or None: ``row`` carries its changes) set on ``row``, whose group
    and flag the actor may give it."""
    stored = type(row).objects.select_for_update().get(pk=row.pk)
    check_change(actor, stored, refused)
    for name, value in (values or {}).items():
        setattr(row, name, value)
    check_ownership(actor, row, stored)
    return stored


def snapshot(row, fields):
    """What the audit entry records of ``row``: its ``fields``, its group by name."""
    values = {name: getattr(row, name) for name in fields}
    values["group"] = row.group.name if row.group_id else None
    return values


def diff(before, after, fields):
    """{field: [old, new]} of the ``fields`` that differ between two snapshots (None: none yet)."""
    before, after = before or {}, after or {}
    return {name: [before.get(name), after.get(name)] for name in fields if before.get(name) != after.get(name)}


def claim(actor, row):
    """A new row is its maker's (the command line's: nobody's, that is staff's)."""
    if row.owner_id is None and actor.user is not None:
        row.owner = actor.user
