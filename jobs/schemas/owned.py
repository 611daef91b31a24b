"""What a user owns and may share with a team, as the API and jobs files both check it: a group
named by its name (``GroupField``) and the owner and group of a limit, a calendar, a channel or a
rule (``OwnedSerializer``)."""

from django.contrib.auth.models import Group
from rest_framework import serializers

from ..definitions import jobs as definitions


class GroupField(serializers.SlugRelatedField):
    def to_internal_value(self, data):
        if definitions.contains_nul(data):
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return super().to_internal_value(data)


class OwnedSerializer(serializers.ModelSerializer):
    """The fields of what a user owns and may share with a team (limits, calendars, channels, rules):
    the owner is who made it; the group, when given, one of theirs (checked by the action)."""

    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True,
                                  help_text="Who made it (null: staff's).")
    group = GroupField(slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True,
                       help_text="A group (team) of yours whose members may also see, use and change it.")
