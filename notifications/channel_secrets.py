"""The secret parts of a channel's configuration, in one place: which keys are secret, how the API
shows them (masked), how an update that sends the mask back keeps the stored value, and how a
text that may quote a secret (a transport's error) is redacted. Encryption at rest wires in here."""

MASK = "********"

# The config keys that carry a credential: a Slack incoming-webhook URL is itself the credential.
SECRET_KEYS = {"slack": ("url",), "webhook": ("secret",), "email": ()}


def secret_keys(kind):
    return SECRET_KEYS.get(kind, ())


def masked(kind, config):
    """``config`` as the API shows it: every secret value that is set replaced by MASK."""
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


def redacted(kind, config, text):
    """``text`` with every secret value of the channel replaced by MASK."""
    if not text or not isinstance(config, dict):
        return text
    for key in secret_keys(kind):
        value = config.get(key)
        if isinstance(value, str) and value:
            text = text.replace(value, MASK)
    return text
