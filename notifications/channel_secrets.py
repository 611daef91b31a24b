"""The secret parts of a channel's configuration, in one place: which keys are secret (each kind
says, ``notifications.channels``), how they are stored (encrypted with the job secrets' keys, ``jobs.access.secrets``), how the API, the admin and an
export show them (masked), how an update that sends the mask back keeps the stored value, and how a
text that may quote a secret (a transport's error) is redacted.

In the database a secret value is a Fernet token of ``JOBS_SECRETS_KEYS`` in place of the value
(``Channel.save`` seals what is not sealed yet); only a transport opens them, to send.
"""

import base64
import binascii
import contextlib
from urllib.parse import urlsplit

from cryptography.fernet import InvalidToken
from django.core.exceptions import ValidationError

import outbound
from jobs.access import secrets as job_secrets

from . import channels

MASK = job_secrets.MASK

# A path segment of a secret URL at least this long is a token of its own (Slack's T…/B…/token).
TOKEN_SEGMENT_CHARS = 12
FERNET_VERSION = 0x80
FERNET_OVERHEAD = 1 + 8 + 16 + 32  # version, timestamp, IV, HMAC


class SecretsUnavailable(job_secrets.SecretsUnavailable):
    """A stored channel secret cannot be decrypted (no key, or not one of its keys)."""


def secret_keys(kind):
    spec = channels.get(kind)
    return spec.secret_fields if spec else ()


def _secret_items(kind, config):
    if not isinstance(config, dict):
        return []
    return [(key, config[key]) for key in secret_keys(kind) if isinstance(config.get(key), str) and config[key]]


def is_sealed(value):
    """Whether ``value`` is a Fernet token (what ``sealed`` stores), not a value given in clear."""
    if not isinstance(value, str) or not value.startswith("gAAAA"):
        return False
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        return False
    return raw[0] == FERNET_VERSION and len(raw) > FERNET_OVERHEAD and (len(raw) - FERNET_OVERHEAD) % 16 == 0


def sealed(kind, config):
    """``config`` as stored: each secret value given in clear encrypted with the first key. A
    ValidationError on ``config`` when there is one and no key to encrypt it with."""
    clear = [key for key, value in _secret_items(kind, config) if not is_sealed(value)]
    if not clear:
        return config
    box = job_secrets.fernet()
    if box is None:
        raise ValidationError({"config": f"{', '.join(clear)}: secret values need JOBS_SECRETS_KEYS to be set on "
                                         "the server."})
    return {**config, **{key: box.encrypt(config[key].encode()).decode() for key in clear}}


def opened(kind, config):
    """``config`` with its secret values in clear, to send or to check; a value not sealed yet (a
    channel not saved) is taken as it is. SecretsUnavailable when a stored value cannot be decrypted."""
    items = [(key, value) for key, value in _secret_items(kind, config) if is_sealed(value)]
    if not items:
        return config
    box = job_secrets.fernet()
    if box is None:
        raise SecretsUnavailable("The channel has secret values and JOBS_SECRETS_KEYS is not set here.")
    try:
        return {**config, **{key: box.decrypt(value.encode()).decode() for key, value in items}}
    except InvalidToken:
        raise SecretsUnavailable("The channel's secret values cannot be decrypted with JOBS_SECRETS_KEYS "
                                 "(was the key they were stored with removed?).") from None


def rotated(kind, config):
    """``config`` with its stored secret values encrypted again with the first key (``secrets rotate``);
    None when it has none."""
    items = [(key, value) for key, value in _secret_items(kind, config) if is_sealed(value)]
    if not items:
        return None
    return {**config, **job_secrets.rotate(dict(items))}


def masked(kind, config):
    """``config`` as the API, the admin and an export show it: every secret value that is set
    replaced by MASK."""
    if not isinstance(config, dict):
        return {}
    return {key: MASK if key in secret_keys(kind) and value not in (None, "") else value
            for key, value in config.items()}


def kept(kind, new, stored):
    """The config to store from an update: a secret key sent as MASK keeps the stored value.
    Returns (config, keys sent as MASK that have no stored value to keep)."""
    if not isinstance(new, dict):
        return new, []
    stored = stored if isinstance(stored, dict) else {}
    config, unknown = dict(new), []
    for key in secret_keys(kind):
        if config.get(key) != MASK:
            continue
        if stored.get(key) in (None, "", MASK):
            unknown.append(key)
        else:
            config[key] = stored[key]
    return config, unknown


def moved(stored_kind, stored, kind, new):
    """A sentence when a change keeps a stored secret value (the stored token itself: a value given
    again is sealed anew) while the channel's kind or the origin of its URL changes: a secret stays
    bound to where it was given (a webhook's signing secret to its host). None otherwise."""
    stored, new = stored if isinstance(stored, dict) else {}, new if isinstance(new, dict) else {}
    kept = [key for key in secret_keys(kind) if is_sealed(new.get(key)) and new.get(key) == stored.get(key)]
    if not kept:
        return None
    if stored_kind != kind:
        change = f"The channel's kind changed from {stored_kind} to {kind}"
    else:
        before, after = (outbound.origin(config.get("url")) for config in (stored, new))
        if before == after:
            return None
        change = f"The URL moved from {before or stored.get('url')} to {after or new.get('url')}"
    return f"{change}; give {', '.join(kept)} again (or clear it) to send it there."


def same_secrets(kind, old, new):
    """Whether two configs (stored or given) hold the same secret values, compared in clear."""
    try:
        old, new = opened(kind, old or {}), opened(kind, new or {})
    except SecretsUnavailable:
        return False
    return all(old.get(key) == new.get(key) for key in secret_keys(kind))


def fragments(kind, config):
    """The texts that give a secret away: each value, and of a secret URL its path (an HTTP library
    quotes the path alone: "Max retries exceeded with url: /services/…") and its long segments."""
    found = set()
    for _, value in _secret_items(kind, config):
        found.add(value)
        if "://" in value:
            parts = urlsplit(value)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            if len(parts.path) >= TOKEN_SEGMENT_CHARS:  # a short path gives nothing away, and is common text
                found.update({path, parts.path})
            found.update(segment for segment in parts.path.split("/") if len(segment) >= TOKEN_SEGMENT_CHARS)
            if parts.query:
                found.add(parts.query)
    return sorted(found, key=len, reverse=True)  # the longest first: a URL before its path


def redacted(kind, config, text):
    """``text`` with every secret value of the channel (``config``: stored or in clear), or a
    piece of one, replaced by MASK."""
    if not text or not isinstance(config, dict):
        return text
    with contextlib.suppress(SecretsUnavailable):  # then nothing of it can be in a text
        config = opened(kind, config)
    for fragment in fragments(kind, config):
        text = text.replace(fragment, MASK)
    return text
