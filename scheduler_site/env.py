"""Typed readers for settings that come from the environment.

Each reader fails at start with a message that names the variable, so a typo in a deployment
shows up as one clear line instead of a confusing error later.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name, default):
    value = os.environ.get(name)
    return default if value is None else value.strip()


def env_str(name, default=""):
    return _raw(name, default)


def env_choice(name, default, choices):
    value = _raw(name, default).lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def var_dir(base_dir):
    """Where the quick start's files live: VAR_DIR, else var/ in the checkout (``base_dir``, the one with
    manage.py), else var/ in the folder the installed service runs in (``pip install .``)."""
    return Path(env_str("VAR_DIR", str(home_dir(base_dir) / "var")))


def home_dir(base_dir):
    """A checkout keeps var/ and staticfiles/ in itself; the installed service in the folder it runs in."""
    return base_dir if (base_dir / "manage.py").is_file() else Path.cwd()


def checkout_secret(var_dir, filename):
    """A secret that ``scripts/quickstart.sh`` made for this checkout and kept in ``var/``, or "" when
    there is none: the default of its variable, so ``manage.py`` works in any shell of the quick
    start's checkout. A deployment sets the variables (which win) and has no such file; a file that
    other users may read is refused rather than trusted."""
    path = var_dir / filename
    if not path.is_file():
        return ""
    if path.stat().st_mode & 0o077:
        raise ImproperlyConfigured(f"{path} may be read by other users: chmod 600 it, or set the variable instead")
    return path.read_text().strip()


def env_bool(name, default=False):
    value = _raw(name, None)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false, 1/0), got {value!r}")


def env_int(name, default, minimum=None):
    return _env_number(name, default, minimum, int, "a whole number")


def env_float(name, default, minimum=None):
    return _env_number(name, default, minimum, float, "a number")


def _env_number(name, default, minimum, parse, what):
    value = _raw(name, None)
    if value is None:
        return default
    try:
        number = parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {what}, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_list(name, default=()):
    value = _raw(name, None)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_networks(name, default=()):
    """A comma-separated list of addresses or CIDR networks, checked (kept as the strings)."""
    import outbound

    entries = env_list(name, default)
    try:
        outbound.parse_networks(entries)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return entries


def env_queues(name, default_queue):
    """Queues and who may use them: "jobs,reports:analysts|finance" is {"jobs": None (everyone),
    "reports": ["analysts", "finance"]}. The default queue must be one of them."""
    queues = {}
    for item in env_list(name, [default_queue]):
        queue, _, groups = item.partition(":")
        names = [g.strip() for g in groups.split("|") if g.strip()]
        if not queue.strip() or (groups and not names):
            raise ImproperlyConfigured(f"{name}: {item!r} is not 'queue' or 'queue:group|group'")
        queues[queue.strip()] = names or None
    if default_queue not in queues:
        raise ImproperlyConfigured(f"{name} must name the default queue {default_queue!r} (JOBS_DEFAULT_QUEUE)")
    return queues


def env_fernet_keys(name, default=""):
    """A comma-separated list of Fernet keys (the first encrypts), each checked."""
    from cryptography.fernet import Fernet

    keys = env_list(name, [key.strip() for key in default.split(",") if key.strip()])
    for position, key in enumerate(keys, 1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            raise ImproperlyConfigured(f"{name}: key {position} is not a Fernet key (32 url-safe base64-encoded "
                                       "bytes; `manage.py secrets new-key` makes one)") from None
    return keys
