"""What a channel kind is: the one object (``CHANNEL``) its package exports.

``render(delivery)`` makes the kind's message from a delivery (``notifications.render`` gives the
words every kind shares); ``send(config, message)`` sends it, ``config`` being the channel's with
its secret values in clear, and returns on success or raises ``TransportError``: ``permanent``
errors (a bad address, a deleted Slack hook) are not retried and are shown on the channel; the
others are retried with backoff. The caller (``notifications.sending``) opens the secrets and
redacts them from whatever comes out.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.template import engines


class TransportError(Exception):
    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent


def no_check(config):
    pass


@dataclass(frozen=True)
class ChannelKindSpec:
    name: str  # stored in Channel.kind (16 characters at most)
    label: str
    config_example: dict  # the config it takes, as the admin, the API schema and the channels page show it
    render: Callable  # render(delivery) -> the message
    send: Callable  # send(config, message); raises TransportError
    validate: Callable = no_check  # validate(config), secrets in clear; raises ValidationError with messages
    secret_fields: tuple = ()  # config keys that carry a credential: stored encrypted, shown masked

    @property
    def config_example_text(self):
        return json.dumps(self.config_example)

    @property
    def config_help(self):
        return f"{self.name}: {self.config_example_text}"


@cache
def _template(path):
    return engines["django"].from_string(Path(path).read_text())


def render_template(package_file, name, context):
    """The template ``name`` kept beside a kind's module (``package_file``: its ``__file__``),
    rendered by the project's Django template engine."""
    return _template(str(Path(package_file).with_name(name))).render(context)
