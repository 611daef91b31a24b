"""Secret values of a job (``secret_environment``, ``secret_http_headers``): stored encrypted,
shown masked, revealed only to the worker that runs the job.

A secret field holds ``{name: Fernet token}``: the names are plain (they are shown, and the audit
trail names them), each value is encrypted with the first key of ``JOBS_SECRETS_KEYS``; every key
of the list decrypts (cryptography's MultiFernet), so a new key goes first and ``manage.py
secrets rotate`` re-encrypts with it before the old one is removed.

What people send and see: ``{name: value}``. ``MASK`` in place of a value keeps the stored one, so
an export, or a form showing the masked values, can be applied back without knowing them.
"""

import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError

MASK = "********"
FIELDS = ("secret_environment", "secret_http_headers")

# Other apps' secret values, encrypted with the same keys, by name ("channels"): a function that
# encrypts them all again with the first key and says how many rows it changed. The apps register
# it in their AppConfig.ready, so ``secrets rotate`` covers them without jobs importing them.
HOLDERS = {}


def register_holder(name, rotate_all):
    HOLDERS[name] = rotate_all


class SecretsUnavailable(Exception):
    """A stored secret cannot be decrypted (no key, or not one of its keys)."""


@functools.lru_cache(maxsize=4)
def _fernet(keys):
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError):
        raise ImproperlyConfigured("JOBS_SECRETS_KEYS must be Fernet keys (32 url-safe base64-encoded bytes each, "
                                   "made by `manage.py secrets new-key`), separated by commas") from None


def fernet():
    keys = tuple(settings.JOBS_SECRETS_KEYS)
    if not keys:
        return None
    return _fernet(keys)


def check_keys(keys):
    """Raises ImproperlyConfigured for a bad key list (at start, from the settings)."""
    if keys:
        _fernet(tuple(keys))


def new_key():
    return Fernet.generate_key().decode()


def seal(submitted, stored, field):
    """``submitted`` ({name: value or MASK}) as the field's stored form, keeping ``stored``'s token
    where the value is MASK. ValidationError keyed by ``field`` on bad input."""
    stored = stored or {}
    if not isinstance(submitted, dict):
        raise ValidationError({field: "Must be a JSON object of names to string values."})
    sealed, wanted = {}, {}
    for name, value in submitted.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValidationError({field: "Must be a JSON object of names to string values."})
        if value == MASK:
            if name not in stored:
                raise ValidationError({field: f"{name}: '{MASK}' keeps a stored value, and there is none: "
                                              "give the value."})
            sealed[name] = stored[name]
        else:
            wanted[name] = value
    if wanted:
        box = fernet()
        if box is None:
            raise ValidationError({field: "Secret values need JOBS_SECRETS_KEYS to be set on the server."})
        sealed.update({name: box.encrypt(value.encode()).decode() for name, value in wanted.items()})
    return {name: sealed[name] for name in submitted}


def masked(stored):
    return {name: MASK for name in (stored or {})}


def reveal(stored):
    """{name: plain value}; SecretsUnavailable when a value cannot be decrypted."""
    if not stored:
        return {}
    box = fernet()
    if box is None:
        raise SecretsUnavailable("The job has secret values and JOBS_SECRETS_KEYS is not set on this worker.")
    try:
        return {name: box.decrypt(token.encode()).decode() for name, token in stored.items()}
    except (InvalidToken, AttributeError):
        raise SecretsUnavailable("The job's secret values cannot be decrypted with JOBS_SECRETS_KEYS "
                                 "(was the key they were stored with removed?).") from None


def rotate(stored):
    """The same values, encrypted again with the first key."""
    box = fernet()
    try:
        return {name: box.rotate(token.encode()).decode() for name, token in (stored or {}).items()}
    except InvalidToken:
        raise SecretsUnavailable("A stored secret value cannot be decrypted with any key of JOBS_SECRETS_KEYS.") from None
