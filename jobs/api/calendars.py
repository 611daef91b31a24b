"""The API's calendars (``jobs.resources.CALENDARS``, served by ``jobs.api.resources``) and their
one call of their own: ``POST /api/calendars/<id or name>/import/`` (an ICS file), for who may
change the calendar."""

import io

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from ..actions import calendars as actions
from ..resources import CALENDARS
from ..schemas.calendars import CalendarSerializer
from ..schemas.jobs import field_errors
from .params import bool_param
from .resources import ResourceViewSet


class IcsParser(BaseParser):
    """An ICS file sent as the request's body (``Content-Type: text/calendar``)."""

    media_type = "text/calendar"

    def parse(self, stream, media_type=None, parser_context=None):
        return {"file": io.BytesIO(stream.read(settings.JOBS_CALENDAR_ICS_MAX_BYTES + 1) if stream else b"")}


class ImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="An iCalendar (.ics) file.")
    replace = serializers.BooleanField(default=False, help_text="Replace the typed-in dates instead of adding to them.")


class CalendarViewSet(ResourceViewSet):
    resource = CALENDARS

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
