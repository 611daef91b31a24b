"""The HTTP POST shared by the Slack and webhook transports, with the status codes sorted into
transient and permanent errors."""

import requests
from django.conf import settings

from . import TransportError

USER_AGENT = "job-scheduler-notifications/1"


def post(url, body, headers=None):
    headers = {"User-Agent": USER_AGENT, **(headers or {})}
    timeout = settings.NOTIFY_HTTP_TIMEOUT_SECONDS
    try:
        response = requests.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False)
    except requests.Timeout:
        raise TransportError(f"no answer from {url} within {timeout:g} s") from None
    except requests.RequestException as exc:
        raise TransportError(f"could not reach {url}: {type(exc).__name__}") from None
    if 200 <= response.status_code < 300:
        return response
    excerpt = response.text[:200].strip()
    message = f"{url} answered HTTP {response.status_code}" + (f": {excerpt}" if excerpt else "")
    # 429 and 5xx are the receiver's passing trouble; any other answer will not change on a retry.
    transient = response.status_code == 429 or response.status_code >= 500
    raise TransportError(message, permanent=not transient)
