"""A channel as the API answers it and as the API and the ``channels:`` section of jobs files both
check it (``ChannelSerializer``: one schema, one set of messages). Its secret parts are write-only:
masked when read, and an update that sends the mask back keeps the stored value
(``channel_secrets``); they are stored encrypted, and error texts never hold them
(``sending.transmit`` redacts them)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.definitions.jobs import contains_nul
from jobs.schemas.owned import OwnedSerializer

from . import channel_secrets, channels
from .models import Channel


def config_description():
    return (f"{channels.config_help()}. Secret values ({channels.secrets_help()}) are answered as "
            f'"{channel_secrets.MASK}"; send "{channel_secrets.MASK}" back to keep the stored value.')


CONFIG_SCHEMA = {"type": "object", "description": config_description(), "additionalProperties": True}


def model_errors(exc):
    if hasattr(exc, "error_dict"):
        return exc.message_dict
    return {"non_field_errors": exc.messages}


@extend_schema_field(CONFIG_SCHEMA)
class ConfigField(serializers.JSONField):
    pass


class ChannelSerializer(OwnedSerializer):
    config = ConfigField(required=False)

    class Meta:
        model = Channel
        fields = ["id", "name", "kind", "config", "enabled", "owner", "group", "shared", "last_error",
                  "disabled_reason", "created_at"]
        read_only_fields = ["last_error", "disabled_reason", "created_at"]

    def to_representation(self, channel):
        data = super().to_representation(channel)
        data["config"] = channel_secrets.masked(channel.kind, channel.config)
        for name in ("last_error", "disabled_reason"):
            data[name] = channel_secrets.redacted(channel.kind, channel.config, data[name])
        return data

    def validate_config(self, config):
        if not isinstance(config, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        if contains_nul(config):
            raise serializers.ValidationError("Must not contain NUL (\\u0000) characters.")
        return config

    def validate(self, attrs):
        channel = self.instance or Channel()
        kind = attrs.get("kind", channel.kind)
        if "config" in attrs:
            attrs["config"], unknown = channel_secrets.kept(kind, attrs["config"], channel.config)
            if unknown:
                raise serializers.ValidationError({"config": [
                    f"{key}: there is no stored value to keep; send the value itself." for key in unknown]})
        candidate = Channel(**{**{name: getattr(channel, name) for name in ("name", "kind", "config", "enabled")},
                               **attrs})
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(model_errors(exc)) from None
        return attrs
