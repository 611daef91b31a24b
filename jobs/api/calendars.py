"""The API's calendars: ``GET, POST /api/calendars/``; ``GET, PATCH, PUT, DELETE
/api/calendars/<id or name>/``; ``POST /api/calendars/<id or name>/import/`` (an ICS file).
A user reads and names their own, their team's and the shared ones (another's answer 404) and
changes their own and their team's; staff any (``jobs.actions.calendars``)."""

import io
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from ..actions import calendars as actions
from ..models import Calendar
from ..models.calendar import normalised_dates
from ..schemas.jobs import field_errors
from ..schemas.owned import OwnedSerializer
from .views import ApiViewSet, bool_param, text_param

DATES_SCHEMA = {
    "type": "array",
    "items": {"oneOf": [
        {"type": "string", "format": "date"},
        {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "label": {"type": "string"}},
         "required": ["date"]},
    ]},
    "description": 'Dates the calendar closes: "2026-12-24" or {"date": "2026-12-24", "label": "Christmas Eve"}. '
                   "Read back as objects, sorted.",
}


@extend_schema_field(DATES_SCHEMA)
class DatesField(serializers.JSONField):
    def to_internal_value(self, data):
        try:
            return normalised_dates(super().to_internal_value(data))
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["dates"]) from None


class CalendarSerializer(OwnedSerializer):
    dates = DatesField(required=False)
    holidays = serializers.SerializerMethodField(
        help_text="The country's holidays this year and next (from the holidays package): dates of the calendar too.")

    class Meta:
        model = Calendar
        fields = ["id", "name", "description", "dates", "country", "subdivision", "holidays", "owner", "group",
                  "shared", "revision", "created_at", "updated_at"]
        read_only_fields = ["revision", "created_at", "updated_at"]

    @extend_schema_field({"type": "array", "items": {"type": "object", "properties": {
        "date": {"type": "string", "format": "date"}, "label": {"type": "string"}}}})
    def get_holidays(self, calendar):
        if not calendar.country:
            return []
        year = datetime.now(UTC).year
        return calendar.holidays_in(year) + calendar.holidays_in(year + 1)

    def validate(self, attrs):
        for name in ("name", "description", "country", "subdivision"):
            if "\x00" in str(attrs.get(name, "")):
                raise serializers.ValidationError({name: ["Must not contain NUL characters."]})
        return attrs


class IcsParser(BaseParser):
    """An ICS file sent as the request's body (``Content-Type: text/calendar``)."""

    media_type = "text/calendar"

    def parse(self, stream, media_type=None, parser_context=None):
        return {"file": io.BytesIO(stream.read(settings.JOBS_CALENDAR_ICS_MAX_BYTES + 1) if stream else b"")}


class ImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="An iCalendar (.ics) file.")
    replace = serializers.BooleanField(default=False, help_text="Replace the typed-in dates instead of adding to them.")


@extend_schema_view(
    list=extend_schema(description="The calendars you may name (yours, your teams', the shared ones), by name.",
                       parameters=[OpenApiParameter("name", OpenApiTypes.STR, description="Exact name.")]),
    create=extend_schema(description="Make a calendar (yours; your team's with `group`; only staff set `shared`): "
                                     "typed-in `dates`, and/or a `country` (and "
                                     "`subdivision`) whose public holidays of every year are its dates too."),
    retrieve=extend_schema(description="One calendar, by id or by name."),
    partial_update=extend_schema(description="Change some fields (of yours or your team's; staff: any). A calendar that jobs use keeps its "
                                             "name."),
    destroy=extend_schema(description="Delete a calendar (of yours or your team's; staff: any) that no job uses (409 "
                                      "otherwise)."),
)
class CalendarViewSet(ApiViewSet, viewsets.ModelViewSet):
    serializer_class = CalendarSerializer
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        found = actions.visible(self.request.user)
        if self.action == "list" and "name" in self.request.query_params:
            found = found.filter(name=text_param(self.request.query_params, "name"))
        return found

    def get_object(self):
        """By id (digits: a name is never only digits) or by name."""
        key = self.kwargs["pk"]
        found = self.get_queryset()
        if "\x00" in key:
            raise Http404
        try:
            calendar = found.get(pk=int(key)) if key.isdigit() else found.get(name=key)
        except (Calendar.DoesNotExist, ValueError, OverflowError):
            raise Http404 from None
        self.check_object_permissions(self.request, calendar)
        return calendar

    def perform_create(self, serializer):
        serializer.instance = actions.create(self.actor, Calendar(**serializer.validated_data))

    @transaction.atomic
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        serializer.instance = actions.edit(self.actor, serializer.instance, dict(serializer.validated_data))

    def perform_destroy(self, calendar):
        actions.delete(self.actor, calendar)

    @property
    def max_body_bytes(self):
        return settings.JOBS_CALENDAR_ICS_MAX_BYTES + 64 * 1024 if self.action == "import_ics" else super().max_body_bytes

    @extend_schema(request={"multipart/form-data": ImportSerializer, "text/calendar": OpenApiTypes.BINARY},
                   parameters=[OpenApiParameter("replace", OpenApiTypes.BOOL,
                                                description="Replace the typed-in dates (default: add to them).")],
                   responses={200: CalendarSerializer},
                   description="Import an iCalendar (.ics) file's events as dates (yours or your team's; staff: any): all-day and "
                               "several-day events as their dates, recurring events expanded from the start of last "
                               "year to five years on. Sent as multipart (`file`) or as the body (text/calendar). "
                               "A file that is too large, or not iCalendar, is a 400 on `file` and changes nothing.")
    @action(detail=True, methods=["post"], url_path="import",
            parser_classes=[MultiPartParser, IcsParser, JSONParser])
    def import_ics(self, request, pk=None):
        calendar = self.get_object()
        if not actions.may_edit(self.actor, calendar):
            raise actions.ActionError(actions.STAFF_ONLY, actions.ActionError.FORBIDDEN)
        upload = request.data.get("file") if hasattr(request.data, "get") else None
        if upload is None:
            raise serializers.ValidationError({"file": ["Send the .ics file as multipart 'file', or as the body."]})
        limit = settings.JOBS_CALENDAR_ICS_MAX_BYTES
        data = upload.read(limit + 1)
        replace = bool_param(request.query_params, "replace") if "replace" in request.query_params else \
            str(request.data.get("replace", "")).lower() in ("true", "1", "yes")
        try:
            calendar = actions.import_ics(self.actor, calendar, data, replace=replace)
        except actions.ActionError as exc:
            if exc.kind == actions.ActionError.INVALID:
                raise serializers.ValidationError(field_errors(DjangoValidationError(exc.fields))) from None
            raise
        return Response(CalendarSerializer(calendar, context=self.get_serializer_context()).data)
