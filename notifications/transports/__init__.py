"""One module per channel kind, each with ``send(config, delivery)`` (``config``: the channel's, its
secret values in clear) that returns on success and raises ``TransportError`` otherwise:
``permanent`` errors (a bad address, a deleted Slack hook) are not retried and are shown on the
channel; the others are retried with backoff.

``send(channel, delivery)`` is the way in: it opens the channel's secrets, and whatever goes wrong
comes out as a TransportError whose message has them redacted, since it is stored on the delivery
and the channel, logged, and shown on the run page."""

import logging
import traceback
from importlib import import_module

from .. import channel_secrets

logger = logging.getLogger(__name__)


class TransportError(Exception):
    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent


def get_transport(kind):
    if kind not in ("email", "slack", "webhook"):
        raise TransportError(f"unknown channel kind {kind!r}", permanent=True)
    return import_module(f"{__name__}.{kind}")


def send(channel, delivery):
    try:
        config = channel_secrets.opened(channel.kind, channel.config)
    except channel_secrets.SecretsUnavailable as exc:
        raise TransportError(str(exc), permanent=True) from None
    try:
        get_transport(channel.kind).send(config, delivery)
    except TransportError as exc:
        raise TransportError(channel_secrets.redacted(channel.kind, config, exc.message), exc.permanent) from None
    except Exception as exc:
        logger.error("%s: unexpected error in the %s transport:\n%s", channel.name, channel.kind,
                     channel_secrets.redacted(channel.kind, config, traceback.format_exc()))
        message = channel_secrets.redacted(channel.kind, config, f"{type(exc).__name__}: {exc}")
        raise TransportError(message) from None
