"""A maintenance window (``jobs.models.Window``) as the API answers it and as the API and the
``windows:`` section of jobs files both check it (``WindowSerializer``): the model's checks
(one-off or recurring, end after start, cron, zone, duration), each message under its field."""

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.settings import api_settings

from ..models import Window
from .owned import OwnedSerializer


class WindowSerializer(OwnedSerializer):
    jobs = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), required=False,
                                 help_text="Ids of jobs (yours or your team's) it applies to.")
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False,
                                 help_text="It applies to your jobs with any of these tags too.")

    class Meta:
        model = Window
        fields = ["id", "name", "description", "mode", "starts_at", "ends_at", "cron", "duration_seconds", "timezone",
                  "jobs", "tags", "owner", "group", "shared", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate(self, attrs):
        # The model's checks across fields, on the window as it would be (a PATCH: with what is stored).
        values = {name: attrs.get(name, getattr(self.instance, name, None)) for name in
                  ("name", "mode", "starts_at", "ends_at", "cron", "duration_seconds", "timezone", "jobs", "tags")}
        window = Window(**{name: value for name, value in values.items() if value is not None})
        try:
            window.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY if name == NON_FIELD_ERRORS else name:
                                               texts for name, texts in exc.message_dict.items()}) from None
        if window.recurring:
            attrs["timezone"] = window.timezone  # UTC when left out
        return attrs

    def save(self, **kwargs):
        raise NotImplementedError("A window is saved by jobs.actions.windows, which checks who may and writes the "
                                  "audit entry: pass it the validated data.")
