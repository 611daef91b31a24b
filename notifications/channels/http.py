"""For the kinds that POST to a URL (Slack, webhooks): the check of the channel's ``url`` and the
POST, both through the outbound guard (an internal address is refused, outside
JOBS_HTTP_ALLOWED_NETWORKS), with the status codes sorted into transient and permanent errors."""

from django.conf import settings
from django.core.exceptions import ValidationError

import outbound

from .base import TransportError

USER_AGENT = "job-scheduler-notifications/1"
MAX_ANSWER_BYTES = 1024 * 1024
EXCERPT_BYTES = 200


def check_url(config):
    url = config.get("url")
    if not isinstance(url, str):
        raise ValidationError('This channel needs {"url": "https://..."}.')
    try:
        outbound.check_url(url, outbound.parse_networks(settings.JOBS_HTTP_ALLOWED_NETWORKS))
    except outbound.Refused as exc:
        raise ValidationError(f"url: {exc}") from None


def post(url, body, headers=None):
    headers = {"User-Agent": USER_AGENT, **(headers or {})}
    timeout = settings.NOTIFY_HTTP_TIMEOUT_SECONDS
    policy = outbound.Policy(allowed_networks=outbound.parse_networks(settings.JOBS_HTTP_ALLOWED_NETWORKS),
                             timeout=timeout, max_bytes=MAX_ANSWER_BYTES, keep_bytes=EXCERPT_BYTES, max_redirects=0)
    try:
        response = outbound.fetch("POST", url, headers=headers, body=body, policy=policy)
    except outbound.Refused as exc:
        raise TransportError(f"refused: {exc}", permanent=True) from None
    except outbound.TimedOut:
        raise TransportError(f"no answer from {url} within {timeout:g} s") from None
    except outbound.UnsafeRequest as exc:
        raise TransportError(f"could not reach {url}: {exc}") from None
    if 200 <= response.status < 300:
        return response
    excerpt = response.body.decode("utf-8", errors="replace").strip()
    message = f"{url} answered HTTP {response.status}" + (f": {excerpt}" if excerpt else "")
    # 429 and 5xx are the receiver's passing trouble; any other answer will not change on a retry.
    transient = response.status == 429 or response.status >= 500
    raise TransportError(message, permanent=not transient)
