"""Where the server's URL and the token come from.

URL: ``--url``, else ``JOBSCTL_URL``, else ``url`` in the config file, else http://127.0.0.1:8000.
Token: ``JOBSCTL_TOKEN``, else ``token`` in the config file (never an option: a command line is
seen by every user of the machine). The config file is ``--config``, else ``JOBSCTL_CONFIG``, else
``$XDG_CONFIG_HOME/jobsctl/config.toml`` (``~/.config/...``); a file holding a token must be
readable by its owner only, as ssh wants of a private key.
"""

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from .errors import USAGE, CliError

DEFAULT_URL = "http://127.0.0.1:8000"
KEYS = {"url", "token"}


@dataclass
class Settings:
    url: str
    url_from: str
    token: str | None
    token_from: str | None
    config_path: Path


def default_config_path():
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "jobsctl" / "config.toml"


def read_config(path, explicit):
    if not path.exists():
        if explicit:
            raise CliError(USAGE, f"{path}: no such config file.")
        return {}
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(USAGE, f"{path}: cannot read the config file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CliError(USAGE, f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(values) - KEYS)
    if unknown:
        raise CliError(USAGE, f"{path}: unknown key(s) {', '.join(unknown)}; the file may hold url and token.")
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise CliError(USAGE, f"{path}: {key} must be a non-empty string.")
    if "token" in values:
        check_private(path)
    return values


def check_private(path):
    if os.name != "posix":
        return
    info = path.stat()
    if info.st_mode & 0o077:
        raise CliError(USAGE, f"{path} holds a token and other users may read it (mode "
                              f"{stat.S_IMODE(info.st_mode):04o}): run chmod 600 {path}")
    if info.st_uid != os.getuid():
        raise CliError(USAGE, f"{path} holds a token and belongs to another user: it must be your own.")


def checked_url(url, source):
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(USAGE, f"{source}: {url!r} is not an http(s) URL such as https://scheduler.example.com.")
    return url.rstrip("/")


def resolve(url_option=None, config_option=None, environ=None):
    environ = os.environ if environ is None else environ
    explicit = config_option or environ.get("JOBSCTL_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_path()
    values = read_config(path, bool(explicit))
    if url_option:
        url, url_from = url_option, "--url"
    elif environ.get("JOBSCTL_URL"):
        url, url_from = environ["JOBSCTL_URL"], "JOBSCTL_URL"
    elif "url" in values:
        url, url_from = values["url"], str(path)
    else:
        url, url_from = DEFAULT_URL, "default"
    if environ.get("JOBSCTL_TOKEN"):
        token, token_from = environ["JOBSCTL_TOKEN"].strip(), "JOBSCTL_TOKEN"
    elif "token" in values:
        token, token_from = values["token"].strip(), str(path)
    else:
        token, token_from = None, None
    return Settings(checked_url(url, url_from), url_from, token, token_from, path)
