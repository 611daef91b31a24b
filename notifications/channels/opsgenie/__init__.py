"""Opsgenie through its Alert API (https://docs.opsgenie.com/docs/alert-api): an alert created per
job with the job's key as its ``alias`` (Opsgenie adds a second failure of an open alert to it),
closed by alias on recovery, acknowledged by alias when a person acknowledges the job's incident
here. The API key (an API integration's) is the channel's secret, sent as ``Authorization: GenieKey
<key>``.

The calls, under ``NOTIFY_OPSGENIE_URL`` (``https://api.eu.opsgenie.com`` for EU accounts), through
the outbound guard: ``POST /v2/alerts`` ``{"message", "alias", "description", "source", "entity",
"priority", "details"}``; ``POST /v2/alerts/<alias>/close?identifierType=alias`` and
``…/acknowledge?identifierType=alias`` ``{"source", "note"}``.
"""

import json
from urllib.parse import quote

from django.conf import settings
from django.core.exceptions import ValidationError

from ..base import ChannelKindSpec
from ..http import post
from ..paging import ACKNOWLEDGE, RESOLVE, alerts, source

PRIORITIES = ("P1", "P2", "P3", "P4", "P5")
MESSAGE_CHARS, ALIAS_CHARS, DESCRIPTION_CHARS = 130, 512, 15000  # the API's bounds
PATHS = {RESOLVE: "close", ACKNOWLEDGE: "acknowledge"}


def validate(config):
    key = config.get("api_key")
    if not isinstance(key, str) or not key.strip() or len(key) > 200 or any(char.isspace() for char in key):
        raise ValidationError('An Opsgenie channel needs {"api_key": "<the API key of an API integration>"}.')
    if config.get("priority") not in (None, *PRIORITIES):
        raise ValidationError(f"priority: one of {', '.join(PRIORITIES)} (default: P3; P4 for the events that warn).")


def request_of(config, alert):
    """(URL, body) of the call that does ``alert``."""
    base = settings.NOTIFY_OPSGENIE_URL.rstrip("/")
    if alert.action in PATHS:
        url = f"{base}/v2/alerts/{quote(alert.key[:ALIAS_CHARS], safe='')}/{PATHS[alert.action]}?identifierType=alias"
        return url, {"source": source(), "note": alert.summary[:DESCRIPTION_CHARS]}
    details = {key: str(value) for key, value in (alert.details or {}).items()}
    description = "\n".join(filter(None, [alert.summary, alert.link, (alert.details or {}).get("error", ""),
                                          alert.acknowledge_url and f"Acknowledge: {alert.acknowledge_url}"]))
    return f"{base}/v2/alerts", {
        "message": alert.summary[:MESSAGE_CHARS], "alias": alert.key[:ALIAS_CHARS],
        "description": description[:DESCRIPTION_CHARS], "source": source(), "entity": alert.job_name,
        "priority": config.get("priority") or ("P4" if alert.warning else "P3"), "details": details}


def send(config, message):
    headers = {"Content-Type": "application/json", "Authorization": f"GenieKey {config['api_key']}"}
    for alert in message:
        url, body = request_of(config, alert)
        post(url, json.dumps(body).encode(), headers)


CHANNEL = ChannelKindSpec(name="opsgenie", label="Opsgenie",
                          config_example={"api_key": "<API integration key>", "priority": "optional"},
                          render=alerts, send=send, validate=validate, secret_fields=("api_key",))
