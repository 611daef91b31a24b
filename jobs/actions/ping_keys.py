"""A team's ping key (``jobs.models.TeamPingKey``): its members read it and make a new one, which
ends the old slug ping URLs (SITE_URL/ping/<key>/<job name>). Each new key writes an audit entry
about the team (subject "group", named by the group); the entry never holds the key."""

from django.contrib.auth.models import Group
from django.db import transaction

from audit import trail
from audit.models import Action, Subject

from ..models import TeamPingKey
from ..models.quota import new_ping_key
from . import permissions


def teams_of(user):
    """The teams (groups) whose ping key ``user`` may read and regenerate: their own groups, all of them for staff."""
    return Group.objects.all() if permissions.sees_everything(user) else user.groups.all()


def team_of(user, pk):
    """The team ``pk`` if ``user`` may read and regenerate its ping key, else None (a 404 to them)."""
    return teams_of(user).filter(pk=pk).first()


def key_of(group):
    """The team's ping key, or None before one is made."""
    return TeamPingKey.objects.filter(group=group).values_list("key", flat=True).first()


def regenerate(actor, group):
    """Make the team's ping key, or a new one in place of the old: the new key."""
    with transaction.atomic():
        row, made = TeamPingKey.objects.select_for_update().get_or_create(group=group)
        if not made:
            row.key = new_ping_key()
            row.save(update_fields=["key", "made_at"])
        trail.record_about(Subject.GROUP, group.name, Action.CREATE if made else Action.ROTATE, actor.source,
                           actor_name=actor.name, user=actor.user, address=actor.address,
                           detail="ping key made" if made else "ping key regenerated: the old slug ping URLs end")
    return row.key
