"""Reading a URL into what a request needs, and the save-time check of a literal address."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from .addresses import literal_address, refusal
from .errors import Refused

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # without brackets
    port: int
    path: str  # path and query, never empty

    @property
    def host_header(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def origin(self):
        return self.scheme, self.host.lower(), self.port


def split_url(url):
    """The URL as a Target; Refused for anything but a plain http(s) URL."""
    if not isinstance(url, str) or any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise Refused("The URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"Not a valid URL: {exc}.") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise Refused("Must be an http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise Refused("Credentials in the URL are not accepted: send them in a header.")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme], path)


def origin(url):
    """Where ``url`` sends a request, as "scheme://host:port" (the host in lower case, the default
    port written out), or None when it is no http(s) URL: secret values given for one origin are
    bound to it."""
    try:
        target = split_url(url)
    except Refused:
        return None
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host.lower()}:{target.port}"


def check_url(url, allowed=()):
    """Refused when ``url`` is not a plain http(s) URL or names a refused address literally.
    A name is only resolved when the request is made (``fetch``)."""
    target = split_url(url)
    ip = literal_address(target.host)
    if ip is not None and (reason := refusal(ip, allowed)):
        raise Refused(f"{target.host} is {reason}; outbound requests may not reach it.")
    return target
