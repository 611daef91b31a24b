"""The channel kinds, each one package (``notifications/channels/email/``, ``slack/``, ``webhook/``)
that exports ``CHANNEL``, a ``base.ChannelKindSpec``: its message, its transport, the config it
takes and checks, and which config keys are secret.

They are listed once, by the package's dotted path, in the setting ``NOTIFICATION_CHANNEL_KINDS``
(default: the three). Everything else asks this registry, and never names a kind: the model's
choices and validation, the channel secrets, the admin, the API, the channels page, jobs-as-code
and the sender. Adding a kind is one new package and its line in the setting.
"""

from functools import cache
from importlib import import_module

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .base import ChannelKindSpec

DEFAULT_KINDS = ("notifications.channels.email", "notifications.channels.slack", "notifications.channels.webhook")
NAME_MAX_LENGTH = 16  # Channel.kind's column


def kinds():
    """The registered kinds by name, in the setting's order."""
    return _loaded(tuple(getattr(settings, "NOTIFICATION_CHANNEL_KINDS", DEFAULT_KINDS)))


@cache
def _loaded(paths):
    found = {}
    for path in paths:
        spec = getattr(import_module(path), "CHANNEL", None)
        if not isinstance(spec, ChannelKindSpec):
            raise ImproperlyConfigured(f"NOTIFICATION_CHANNEL_KINDS: {path} exports no CHANNEL (a ChannelKindSpec).")
        if spec.name in found or not 0 < len(spec.name) <= NAME_MAX_LENGTH:
            raise ImproperlyConfigured(f"NOTIFICATION_CHANNEL_KINDS: {path}: the kind's name {spec.name!r} is taken "
                                       f"or not 1 to {NAME_MAX_LENGTH} characters long.")
        found[spec.name] = spec
    return found


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
