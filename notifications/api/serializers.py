"""JSON shapes of channels and rules: what only the API answers of a channel, and a rule. A
channel's own schema, which jobs files share, is ``notifications.schemas``."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from jobs.actions.permissions import owned_or_shared, sees_everything, visible_jobs
from jobs.models import Job
from jobs.schemas.owned import OwnedSerializer

from ..models import RULE_EVENTS, Channel, Rule, RuleScope
from ..schemas import model_errors


class ChannelDirectorySerializer(serializers.ModelSerializer):
    """What a user who is not staff sees of a channel: enough to point a rule at it."""

    class Meta:
        model = Channel
        fields = ["id", "name", "kind", "enabled", "shared"]
        read_only_fields = fields


class ChannelTestSerializer(serializers.Serializer):
    sent = serializers.BooleanField()
    detail = serializers.CharField()


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
