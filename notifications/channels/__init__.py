"""The channel kinds, each one package (``notifications/channels/email/``, ``slack/``, ``webhook/``,
``pagerduty/``, ``opsgenie/``) that exports ``CHANNEL``, a ``base.ChannelKindSpec``: its message,
its transport, the config it takes and checks, and which config keys are secret.

They are listed once, by the package's dotted path, in the setting ``NOTIFICATION_CHANNEL_KINDS``
(default: the five). Everything else asks this registry, and never names a kind: the model's
choices and validation, the channel secrets, the admin, the API, the channels page, jobs-as-code
and the sender. Adding a kind is one new package and its line in the setting.
"""

from jobs import kinds as job_kinds

from .base import ChannelKindSpec

DEFAULT_KINDS = ("notifications.channels.email", "notifications.channels.slack", "notifications.channels.webhook",
                 "notifications.channels.pagerduty", "notifications.channels.opsgenie")
NAME_MAX_LENGTH = 16  # Channel.kind's column


def kinds():
    """The registered kinds by name, in the setting's order."""
    return job_kinds.registered("NOTIFICATION_CHANNEL_KINDS", DEFAULT_KINDS, "CHANNEL", ChannelKindSpec, NAME_MAX_LENGTH)


def get(name):
    """The kind named ``name``, or None when it is not registered (any more)."""
    return kinds().get(name)


def choices():
    """(name, label) of each kind: Channel.kind's choices, evaluated when asked."""
    return [(spec.name, spec.label) for spec in kinds().values()]


def config_help():
    return "; ".join(spec.config_help for spec in kinds().values())


def secrets_help():
    """Which config keys are secret, kind by kind, for the admin and the API's help."""
    return "; ".join(f"{spec.name}: {', '.join(spec.secret_fields)}" for spec in kinds().values() if spec.secret_fields)
