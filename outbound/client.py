"""``fetch``: one request (and its redirects) through urllib3, each hop pinned to the address that
was checked.

urllib3 is given the checked IP address as the host to connect to; the name still goes in the Host
header, the TLS server name and the certificate check, so HTTPS works as usual. A deadline covers
the whole exchange: a watchdog shuts the socket down when it passes, which also ends a server that
trickles its answer a byte at a time.
"""

import contextlib
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urljoin

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError

from .addresses import refusal
from .errors import Refused, RequestFailed, TimedOut, TooLarge
from .urls import split_url

REDIRECTS = {301, 302, 303, 307, 308}
CHUNK = 64 * 1024
# Dropped when a redirect leads to another origin (as browsers and requests do for Authorization).
CREDENTIAL_HEADERS = {"authorization", "cookie", "proxy-authorization"}

try:
    import certifi

    CA_CERTS = certifi.where()
except ImportError:  # urllib3 then uses the system's store
    CA_CERTS = None


@dataclass(frozen=True)
class Policy:
    allowed_networks: tuple = ()  # ipaddress networks that may be reached although not public
    timeout: float = 10.0  # seconds for the whole exchange, redirects included
    max_bytes: int = 10 * 1024 * 1024  # a longer answer is TooLarge
    keep_bytes: int = 64 * 1024  # how much of the body the Response holds
    max_redirects: int = 5  # 0: a redirect is returned as it is
    resolve: object = field(default=socket.getaddrinfo, repr=False)  # the resolver, for the tests' fake DNS
    ca_certs: str | None = CA_CERTS  # the certificate authorities HTTPS trusts


@dataclass
class Response:
    status: int
    headers: dict
    body: bytes  # the first keep_bytes of it
    size: int  # bytes read in all
    url: str  # after redirects
    address: str  # the address it came from


class Deadline:
    """Seconds left, and a watchdog that shuts down the sockets it watches when none are left."""

    def __init__(self, seconds):
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._sockets = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self):
        left = self.ends - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimedOut("No complete answer in time.")
        return left

    def watch(self, sock):
        self._sockets.append(sock)
        if self.expired:
            self._expire()

    def _expire(self):
        self.expired = True
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self):
        self._timer.cancel()


class _Watched:
    """A connection that hands its socket to the deadline once connected."""

    def __init__(self, *args, deadline, **kwargs):
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self):
        super().connect()
        self._deadline.watch(self.sock)


class WatchedHTTPConnection(_Watched, HTTPConnection):
    pass


class WatchedHTTPSConnection(_Watched, HTTPSConnection):
    pass


def addresses_of(target, policy):
    """The addresses of ``target``'s host, every one of them checked; Refused names the first
    refused one (a name that resolves to both a public and an internal address is refused)."""
    try:
        found = policy.resolve(target.host, target.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RequestFailed(f"Cannot resolve {target.host}: {exc.strerror}.") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in found))
    for ip in addresses:
        if reason := refusal(ip, policy.allowed_networks):
            shown = target.host if str(ip) == target.host else f"{target.host} ({ip})"
            raise Refused(f"{shown} is {reason}; outbound requests may not reach it.")
    if not addresses:
        raise RequestFailed(f"{target.host} has no address.")
    return addresses


def _pool(target, ip, deadline, policy):
    timeout = urllib3.Timeout(connect=deadline.remaining(), read=deadline.remaining())
    common = {"host": str(ip), "port": target.port, "timeout": timeout, "retries": False, "maxsize": 1,
              "deadline": deadline}
    if target.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(server_hostname=target.host, assert_hostname=target.host,
                                           cert_reqs="CERT_REQUIRED", ca_certs=policy.ca_certs, **common)
        pool.ConnectionCls = WatchedHTTPSConnection
    else:
        pool = urllib3.HTTPConnectionPool(**common)
        pool.ConnectionCls = WatchedHTTPConnection
    return pool


def _send(target, method, headers, body, deadline, policy):
    addresses = addresses_of(target, policy)
    last_error = None
    for ip in addresses:  # in the resolver's order, as a browser would try them
        pool = _pool(target, ip, deadline, policy)
        try:
            response = pool.urlopen(method, target.path, body=body, headers={**headers, "Host": target.host_header},
                                    redirect=False, retries=False, preload_content=False, assert_same_host=False)
            return response, pool, ip
        except urllib3.exceptions.NewConnectionError as exc:
            last_error = exc
            pool.close()
        except HTTPError as exc:
            pool.close()
            raise _failure(exc, deadline, target) from None
    raise _failure(last_error, deadline, target)


def _failure(exc, deadline, target):
    # urllib3's NewConnectionError is a ConnectTimeoutError too, for old callers: a refusal, not a timeout.
    timed_out = isinstance(exc, urllib3.exceptions.TimeoutError) and not isinstance(
        exc, urllib3.exceptions.NewConnectionError)
    if deadline.expired or timed_out:
        return TimedOut(f"No complete answer from {target.host} in time.")
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return RequestFailed(f"Could not connect to {target.host} port {target.port}: "
                             f"{str(exc).rpartition('new connection: ')[2]}")
    reason = getattr(exc, "reason", None) or exc
    return RequestFailed(f"Could not reach {target.host}: {reason}")


def _read(response, deadline, policy):
    kept, size = bytearray(), 0
    try:
        while chunk := response.read1(CHUNK):
            size += len(chunk)
            if len(kept) < policy.keep_bytes:
                kept += chunk[:policy.keep_bytes - len(kept)]
            if size > policy.max_bytes:
                raise TooLarge(f"The answer is larger than {policy.max_bytes} bytes; stopped reading it.")
    except (HTTPError, OSError) as exc:
        if deadline.expired:
            raise TimedOut("No complete answer in time.") from None
        raise RequestFailed(f"The answer broke off: {exc}") from None
    if deadline.expired:  # the watchdog's shutdown reads as the end of the body
        raise TimedOut("No complete answer in time.")
    return bytes(kept), size


def fetch(method, url, *, headers=None, body=None, policy=Policy(), sensitive_headers=()):
    """Send one request; follow up to ``policy.max_redirects`` redirects, each checked like the
    first. Raises Refused, TimedOut, TooLarge or RequestFailed; returns a Response otherwise.
    ``sensitive_headers`` (names) are dropped with the credentials when a redirect changes origin."""
    headers = dict(headers or {})
    sensitive = CREDENTIAL_HEADERS | {name.lower() for name in sensitive_headers}
    deadline = Deadline(policy.timeout)
    target = split_url(url)
    try:
        for hop in range(policy.max_redirects + 1):
            response, pool, ip = _send(target, method, headers, body, deadline, policy)
            try:
                location = response.headers.get("Location")
                if response.status in REDIRECTS and location and hop < policy.max_redirects:
                    following = split_url(urljoin(url, location))
                    if following.origin != target.origin:
                        headers = {k: v for k, v in headers.items() if k.lower() not in sensitive}
                    if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                        method, body = ("HEAD" if method == "HEAD" else "GET"), None
                        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
                    url, target = urljoin(url, location), following
                    continue
                kept, size = _read(response, deadline, policy)
                return Response(response.status, dict(response.headers), kept, size, url, str(ip))
            finally:
                response.release_conn()
                pool.close()
        raise RequestFailed(f"More than {policy.max_redirects} redirects.")
    finally:
        deadline.cancel()
