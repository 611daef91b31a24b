"""``GET /api/teams/<id>/ping-key/``: the team's ping key (null before one is made) and its slug ping
URLs' base; ``POST``: make it, or a new one that ends the old URLs (jobs.actions.ping_keys). Its own
call rather than a field of ``/api/quotas/``: quotas are staff's to set, the ping key is every
member's, and a team has one whether or not staff gave it quotas. Another team's id: a 404."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import Source

from ..actions import ping_keys
from ..actions.jobs import Actor


class PingKeySerializer(serializers.Serializer):
    team = serializers.CharField(help_text="The team: a group's name.")
    ping_key = serializers.CharField(allow_null=True, help_text="null: none made yet (POST makes one).")
    ping_url_base = serializers.CharField(
        allow_null=True, help_text="SITE_URL/ping/<ping_key>: add /<a check-in job's name> of the team.")


def _answer(group, key):
    return Response({"team": group.name, "ping_key": key,
                     "ping_url_base": f"{settings.SITE_URL}/ping/{key}" if key else None})


class TeamPingKeyView(APIView):
    def _team(self, request, pk):
        team = ping_keys.team_of(request.user, pk)
        if team is None:
            raise NotFound("You are in no team with this id.")
        return team

    @extend_schema(responses=PingKeySerializer, summary="Your team's ping key")
    def get(self, request, pk):
        team = self._team(request, pk)
        return _answer(team, ping_keys.key_of(team))

    @extend_schema(request=None, responses=PingKeySerializer, summary="Make your team's ping key, or a new one")
    def post(self, request, pk):
        team = self._team(request, pk)
        return _answer(team, ping_keys.regenerate(Actor.of_request(request, Source.API), team))
