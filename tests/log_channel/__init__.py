"""A channel kind the tests add the way a deployment would (one package, one line in
NOTIFICATION_CHANNEL_KINDS): it appends one line per message to a file, signed with its secret
token, so a test reads what was sent and with which token."""

from pathlib import Path

from django.core.exceptions import ValidationError

from notifications.channels.base import ChannelKindSpec, TransportError
from notifications.render import context_for


def validate(config):
    if not isinstance(config.get("path"), str) or not Path(config["path"]).is_absolute():
        raise ValidationError('A log channel needs {"path": "/an/absolute/path"}.')
    if not isinstance(config.get("token"), str) or not config["token"]:
        raise ValidationError('A log channel needs {"token": "..."}.')


def render(delivery):
    return context_for(delivery)["headline"]


def send(config, line):
    try:
        with open(config["path"], "a") as log:
            log.write(f"{config['token']} {line}\n")
    except OSError as exc:
        raise TransportError(f"cannot write {config['path']}: {exc}", permanent=True) from None


CHANNEL = ChannelKindSpec(name="log", label="Log file", config_example={"path": "/var/log/alerts.log", "token": "..."},
                          render=render, send=send, validate=validate, secret_fields=("token",))
