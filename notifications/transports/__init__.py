"""One module per channel kind, each with ``send(channel, delivery)`` that returns on success and
raises ``TransportError`` otherwise: ``permanent`` errors (a bad address, a deleted Slack hook) are
not retried and are shown on the channel; the others are retried with backoff."""

from importlib import import_module


class TransportError(Exception):
    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent


def get_transport(kind):
    if kind not in ("email", "slack", "webhook"):
        raise TransportError(f"unknown channel kind {kind!r}", permanent=True)
    return import_module(f"{__name__}.{kind}")
