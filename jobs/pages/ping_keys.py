"""The signed-in user's teams' ping keys: each team's key (or none yet) and its slug ping URLs' base,
and a button that makes it, or a new one that ends the old URLs (jobs.actions.ping_keys, with its
audit entry). A team the user is not in: a 404."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from audit.models import Source

from ..actions import ping_keys
from ..actions.jobs import Actor
from ..models import TeamPingKey
from .common import page


@login_required
def ping_key_list(request):
    teams = list(ping_keys.teams_of(request.user).order_by("name"))
    keys = dict(TeamPingKey.objects.filter(group__in=teams).values_list("group_id", "key"))
    rows = [{"team": team, "key": keys.get(team.pk),
             "url_base": f"{settings.SITE_URL}/ping/{keys[team.pk]}" if team.pk in keys else None} for team in teams]
    return page(request, "pages/ping_keys.html", {"rows": rows, "site_url": settings.SITE_URL}, "ping-keys")


@login_required
@require_POST
def ping_key_make(request, pk):
    team = ping_keys.team_of(request.user, pk)
    if team is None:
        raise Http404("You are in no team with this id.")
    had = ping_keys.key_of(team) is not None
    ping_keys.regenerate(Actor.of_request(request, Source.PAGE), team)
    messages.success(request, f"A new ping key for {team.name}: the old slug ping URLs no longer answer."
                     if had else f"{team.name} has a ping key: its check-in jobs answer at their slug ping URLs.")
    return redirect("pages:ping-keys")
