"""Channel secrets at rest: each secret value of a channel's config (a Slack URL, a webhook secret)
is encrypted with the first key of JOBS_SECRETS_KEYS, as job secrets are; a text that quoted one (a
channel's or a delivery's last error, the reason a channel was disabled) has it replaced by the mask.

Frozen here (not imported from ``notifications.channel_secrets``) so the migration keeps doing what
it did. With secret values stored and no key set it stops, saying so: set JOBS_SECRETS_KEYS
(``manage.py secrets new-key``) and migrate again."""

import base64
import binascii
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings
from django.db import migrations

SECRET_KEYS = {"slack": ("url",), "webhook": ("secret",)}
MASK = "********"


def _is_token(value):
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        return False
    return value.startswith("gAAAA") and raw[0] == 0x80 and len(raw) > 57 and (len(raw) - 57) % 16 == 0


def _fragments(values):
    found = set()
    for value in values:
        found.add(value)
        if "://" in value:
            parts = urlsplit(value)
            if len(parts.path) > 1:
                found.update({parts.path, parts.path + (f"?{parts.query}" if parts.query else "")})
            found.update(segment for segment in parts.path.split("/") if len(segment) >= 12)
    return sorted(found, key=len, reverse=True)


def _redacted(text, fragments):
    for fragment in fragments:
        text = text.replace(fragment, MASK)
    return text


def encrypt(apps, schema_editor):
    Channel = apps.get_model("notifications", "Channel")
    Delivery = apps.get_model("notifications", "Delivery")
    keys = list(settings.JOBS_SECRETS_KEYS)
    box = MultiFernet([Fernet(key) for key in keys]) if keys else None
    for channel in Channel.objects.filter(kind__in=list(SECRET_KEYS)).order_by("pk"):
        config = channel.config if isinstance(channel.config, dict) else {}
        clear = {key: config[key] for key in SECRET_KEYS[channel.kind]
                 if isinstance(config.get(key), str) and config[key] and not _is_token(config[key])}
        if not clear:
            continue
        if box is None:
            raise RuntimeError(f"The notification channel {channel.name!r} has secret values stored in clear and "
                               "JOBS_SECRETS_KEYS is not set: set it (manage.py secrets new-key) and migrate again "
                               "to encrypt them.")
        fragments = _fragments(clear.values())
        channel.config = {**config, **{key: box.encrypt(value.encode()).decode() for key, value in clear.items()}}
        channel.last_error = _redacted(channel.last_error, fragments)
        channel.disabled_reason = _redacted(channel.disabled_reason, fragments)
        channel.save(update_fields=["config", "last_error", "disabled_reason"])
        for delivery in Delivery.objects.filter(channel=channel).exclude(last_error="").only("pk", "last_error"):
            redacted = _redacted(delivery.last_error, fragments)
            if redacted != delivery.last_error:
                Delivery.objects.filter(pk=delivery.pk).update(last_error=redacted)


def decrypt(apps, schema_editor):
    """Back to clear values, for the code before this migration."""
    Channel = apps.get_model("notifications", "Channel")
    keys = list(settings.JOBS_SECRETS_KEYS)
    for channel in Channel.objects.filter(kind__in=list(SECRET_KEYS)).order_by("pk"):
        config = channel.config if isinstance(channel.config, dict) else {}
        tokens = {key: config[key] for key in SECRET_KEYS[channel.kind]
                  if isinstance(config.get(key), str) and _is_token(config[key])}
        if tokens:
            box = MultiFernet([Fernet(key) for key in keys])
            channel.config = {**config, **{key: box.decrypt(value.encode()).decode() for key, value in tokens.items()}}
            channel.save(update_fields=["config"])


class Migration(migrations.Migration):
    dependencies = [("notifications", "0004_as_code")]

    operations = [migrations.RunPython(encrypt, decrypt, elidable=False)]
