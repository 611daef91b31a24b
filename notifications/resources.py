"""Channels and rules, each declared once (``jobs.resources.Resource``): served by the generic API
(``jobs.api.resources``) and admin (``jobs.admin.through_actions.ResourceAdmin``). Their sections of
jobs files are their own (``notifications.as_code``: secrets from the environment, rules named by
what they watch)."""

from jobs.resources import Resource

from . import actions
from .models import Channel, Rule

CHANNELS = Resource(
    model=Channel, noun="channel", serializer="notifications.schemas.ChannelSerializer", visible=actions.visible_channels,
    create=actions.create_channel, edit=actions.edit_channel, delete=actions.delete_channel,
    may_edit=actions.may_change_channel, refused=actions.SHARED_CHANNEL, route="channels", basename="channel",
    api_docs={
        "list": "Every channel. Holders of notifications.view_channel or change_channel see each one's configuration "
                "(secrets masked) and errors; other users see id, name, kind and enabled.",
        "create": "Add a channel (notifications.add_channel).",
        "update": "Replace a channel (notifications.change_channel). A secret sent as the mask keeps its stored value.",
        "partial_update": "Change a channel (notifications.change_channel). Without `config` the configuration is "
                          "kept; a secret sent as the mask keeps its stored value. Enabling a channel clears its "
                          "`disabled_reason`.",
        "destroy": "Delete a channel with its rules and deliveries (notifications.delete_channel).",
    },
    admin_list=("name", "kind", "enabled", "owner", "group", "shared", "last_error", "disabled_reason"),
    admin_search=("name",),
)

RULES = Resource(
    model=Rule, noun="rule", serializer="notifications.schemas.RuleSerializer", visible=actions.visible_rules,
    create=actions.create_rule, edit=actions.edit_rule, delete=actions.delete_rule, route="rules", basename="rule",
    filters={"channel": (int, "A channel's id."), "job": (int, "A job's id.")},
    api_docs={
        "list": "Rules: all of them for staff; for other users, their own, their team's and the rules of the jobs "
                "they can see. `paused_reason` says why the service paused one (a permanent error of a channel not the "
                "rule owner's, caused by what the rule sent): fix it, then set `enabled` again.",
        "create": "Add a rule (yours; your team's with `group`). Users who are not staff add rules for one of their "
                  "jobs (scope job) on a channel of theirs, their team's, or a shared one.",
    },
    admin_list=("__str__", "channel", "scope", "enabled", "owner", "group", "paused_reason"),
)
