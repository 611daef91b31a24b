"""A channel as the API answers it and as the API and the ``channels:`` section of jobs files both
check it (``ChannelSerializer``: one schema, one set of messages), and a rule as the API answers and
checks it (``RuleSerializer``). A channel's secret parts are write-only: masked when read, and an
update that sends the mask back keeps the stored value (``channel_secrets``); they are stored
encrypted, and error texts never hold them (``sending.transmit`` redacts them)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.actions.permissions import owned_or_shared, sees_everything, visible_jobs
from jobs.definitions.jobs import contains_nul
from jobs.models import Job
from jobs.schemas.owned import OwnedSerializer

from . import channel_secrets, channels
from .models import RULE_EVENTS, Channel, Rule, RuleScope


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


class RuleSerializer(OwnedSerializer):
    events = serializers.ListField(child=serializers.ChoiceField(choices=RULE_EVENTS), allow_empty=False)
    channel_name = serializers.CharField(source="channel.name", read_only=True)
    job_name = serializers.CharField(source="job.name", read_only=True, allow_null=True)

    class Meta:
        model = Rule
        fields = ["id", "channel", "channel_name", "events", "scope", "tag", "job", "job_name", "enabled", "owner",
                  "group", "paused_reason"]
        read_only_fields = ["paused_reason"]
        extra_kwargs = {
            "channel": {"help_text": "The channel's id: one of yours, your team's, or a shared one."},
            "job": {"help_text": "The job's id, with scope job (a job you can see)."},
            "tag": {"help_text": "The tag, with scope tag."},
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if "job" in self.fields:  # the schema is also built without a user
            known = user and user.is_authenticated
            self.fields["job"].queryset = visible_jobs(user) if known else Job.objects.none()
            self.fields["channel"].queryset = owned_or_shared(Channel.objects.all(), user) if known \
                else Channel.objects.none()

    def validate_events(self, events):
        return list(dict.fromkeys(events))

    def validate(self, attrs):
        rule = self.instance or Rule()
        values = {name: getattr(rule, name) for name in ("events", "scope", "tag", "job", "enabled")}
        if rule.channel_id:
            values["channel"] = rule.channel
        values.update(attrs)
        user = self.context["request"].user
        if not sees_everything(user) and values["scope"] != RuleScope.JOB:
            raise serializers.ValidationError({"scope": [
                "Only staff may add rules for all jobs or a tag; yours name one of your jobs (scope job)."]})
        if values["scope"] != RuleScope.JOB:
            attrs["job"] = None
        if values["scope"] != RuleScope.TAG:
            attrs["tag"] = ""
        candidate = Rule(**{**values, **attrs})
        try:
            candidate.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(model_errors(exc)) from None
        return attrs
