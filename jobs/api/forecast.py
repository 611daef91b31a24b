"""``GET /api/forecast/?hours=24``: the runs due per minute, the peaks with their jobs and the worker
slots they need (``jobs.operations.forecast``), over the caller's jobs (staff: every job, and the
worker slots seen now). ``POST /api/forecast/spread/``: staff set one spread on many jobs
(``jobs.actions.spreading``)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import Source

from ..actions import jobs as actions
from ..actions import spreading
from ..actions.permissions import sees_everything, visible_jobs
from ..operations import forecast as forecasts
from ..timing.spread import MAX_SPREAD_SECONDS
from .views import api_error


def forecast_of(user, params, now=None):
    """The forecast the caller asked for (``params``: hours, peaks, jobs), over the jobs they see;
    a 400 naming a bad parameter."""
    try:
        hours, peaks, listed = forecasts.parameters(params)
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from None
    now = now or timezone.now()
    workers_seen = forecasts.worker_slots_seen(now) if sees_everything(user) else None
    return forecasts.forecast(visible_jobs(user), now, hours, peaks, listed, workers_seen=workers_seen)


class PeakJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class SuggestionSerializer(serializers.Serializer):
    spread_seconds = serializers.IntegerField()
    over_minutes = serializers.IntegerField()
    jobs = serializers.IntegerField(help_text="The jobs of the minute.")
    runs_per_minute_after = serializers.IntegerField()


class PeakSerializer(serializers.Serializer):
    minute = serializers.DateTimeField()
    runs = serializers.IntegerField()
    worker_slots_needed = serializers.IntegerField(
        help_text="Worker slots that run the minute's runs within the minute: the sum of each run's recent mean "
                  "duration (at most 60 s) over 60 s.")
    jobs = PeakJobSerializer(many=True, help_text="The jobs of the minute, the biggest groups first (capped: ?jobs=).")
    jobs_total = serializers.IntegerField(help_text="The jobs with a slot in the minute.")
    jobs_more = serializers.IntegerField(help_text="The jobs of the minute not listed in jobs.")
    suggestion = SuggestionSerializer(allow_null=True)


class ForecastSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    hours = serializers.IntegerField()
    total_runs = serializers.IntegerField()
    held_runs = serializers.IntegerField(help_text="Slots that hold maintenance windows skip: left out of the counts.")
    per_minute = serializers.ListField(child=serializers.IntegerField(), help_text="Runs due in each minute from start.")
    level = serializers.IntegerField(help_text="The mean runs per minute, rounded up.")
    peaks = PeakSerializer(many=True)
    worker_slots_seen = serializers.IntegerField(
        allow_null=True, help_text="Worker processes that ran an attempt in the last 10 minutes (staff only).")
    groups = serializers.IntegerField(help_text="How many groups of jobs with the same slots were computed.")


class SpreadRequestSerializer(serializers.Serializer):
    jobs = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=spreading.MAX_ID), allow_empty=False,
                                 max_length=spreading.MAX_JOBS)
    spread = serializers.IntegerField(min_value=0, max_value=MAX_SPREAD_SECONDS)


class SpreadResponseSerializer(serializers.Serializer):
    changed = serializers.IntegerField(help_text="How many jobs had another spread before.")


class ForecastView(APIView):
    @extend_schema(
        summary="Runs due per minute over the next hours, the peaks and the worker slots they need",
        parameters=[
            OpenApiParameter("hours", int, description=f"1 to {forecasts.MAX_HOURS} (default 24)"),
            OpenApiParameter("peaks", int, description=f"The busiest minutes shown, 1 to {forecasts.MAX_PEAKS} (default 10)"),
            OpenApiParameter("jobs", int, description=f"Jobs listed per peak, 0 to {forecasts.MAX_LISTED} (default 20)"),
        ],
        responses=ForecastSerializer,
    )
    def get(self, request):
        return Response(ForecastSerializer(forecast_of(request.user, request.query_params)).data)


class SpreadView(APIView):
    @extend_schema(summary="Staff: set one spread on many jobs (one audit entry per job)",
                   request=SpreadRequestSerializer,
                   responses=SpreadResponseSerializer)
    def post(self, request):
        if not sees_everything(request.user):
            raise PermissionDenied("Only staff may spread jobs from the forecast.")
        body = SpreadRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        actor = actions.Actor.of_request(request, Source.API)
        try:
            changed = spreading.apply_spread(actor, body.validated_data["jobs"], body.validated_data["spread"])
        except actions.ActionError as exc:
            raise api_error(exc) from None
        return Response({"changed": changed})
