"""JSON shapes of channels that only the API answers: a channel's directory entry and a test's
answer. A channel's and a rule's own schemas are ``notifications.schemas``."""

from rest_framework import serializers

from ..models import Channel


class ChannelDirectorySerializer(serializers.ModelSerializer):
    """What a user who is not staff sees of a channel: enough to point a rule at it."""

    class Meta:
        model = Channel
        fields = ["id", "name", "kind", "enabled", "shared"]
        read_only_fields = fields


class ChannelTestSerializer(serializers.Serializer):
    sent = serializers.BooleanField()
    detail = serializers.CharField()
