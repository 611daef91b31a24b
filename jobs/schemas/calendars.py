"""A calendar (``jobs.models.Calendar``) as the API answers and checks it (``CalendarSerializer``):
its typed-in dates, read back as objects, and its country's holidays this year and next."""

from datetime import UTC, datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Calendar
from ..models.calendar import normalised_dates
from .owned import OwnedSerializer

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
