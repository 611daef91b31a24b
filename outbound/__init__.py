"""Outbound HTTP that cannot be turned against the service's own network (SSRF).

A library: no Django, nothing of the project. ``check_url`` is for the moment a URL is saved (a
literal address that is refused is an error on the field); ``fetch`` is for the moment it is
called: it resolves the name once, refuses the request when any address is refused, connects to
the address it checked (no second lookup, so no DNS rebinding), checks every redirect the same
way, and caps the time and the size of the answer.
"""

from .addresses import literal_address, parse_networks, refusal
from .client import Policy, Response, fetch
from .errors import Refused, RequestFailed, TimedOut, TooLarge, UnsafeRequest
from .urls import check_url, origin, split_url

__all__ = [
    "Policy", "Refused", "RequestFailed", "Response", "TimedOut", "TooLarge", "UnsafeRequest", "check_url",
    "fetch", "literal_address", "origin", "parse_networks", "refusal", "split_url",
]
