"""PagerDuty through its Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/overview/):
one ``trigger`` per alert with the job's key as its ``dedup_key`` (a second failure of an open
incident adds to it), ``resolve`` on recovery, ``acknowledge`` when a person acknowledges the job's
incident here. The integration's routing key is the channel's secret.

Each alert is one POST of ``{"routing_key", "event_action", "dedup_key", "payload": {"summary",
"source", "severity", "component", "class", "custom_details"}, "links", "client", "client_url"}``
(the payload with a trigger only) to ``NOTIFY_PAGERDUTY_URL``, through the outbound guard.
"""

import json
import re

from django.conf import settings
from django.core.exceptions import ValidationError

from ..base import ChannelKindSpec
from ..http import post
from ..paging import TRIGGER, alerts, source

SEVERITIES = ("critical", "error", "warning", "info")
ROUTING_KEY = re.compile(r"[A-Za-z0-9]{32}")
SUMMARY_CHARS = 1024  # the API's bound
CLIENT = "Job scheduler"


def validate(config):
    if not isinstance(config.get("routing_key"), str) or not ROUTING_KEY.fullmatch(config["routing_key"]):
        raise ValidationError('A PagerDuty channel needs {"routing_key": "<the 32-character integration key of an '
                              'Events API v2 integration>"}.')
    if config.get("severity") not in (None, *SEVERITIES):
        raise ValidationError(f"severity: one of {', '.join(SEVERITIES)} (default: error; warning for the events "
                              "that warn).")


def event_of(config, alert):
    event = {"routing_key": config["routing_key"], "event_action": alert.action, "dedup_key": alert.key}
    if alert.action != TRIGGER:
        return event
    severity = config.get("severity") or ("warning" if alert.warning else "error")
    event["payload"] = {"summary": alert.summary[:SUMMARY_CHARS], "source": source(), "severity": severity,
                        "component": alert.job_name, "class": alert.event, "custom_details": alert.details or {}}
    event["client"], event["client_url"] = CLIENT, settings.SITE_URL
    links = [{"href": alert.link, "text": "The run"}] if alert.link else []
    if alert.acknowledge_url:
        links.append({"href": alert.acknowledge_url, "text": "Acknowledge in the job scheduler"})
    if links:
        event["links"] = links
    return event


def send(config, message):
    for alert in message:
        post(settings.NOTIFY_PAGERDUTY_URL, json.dumps(event_of(config, alert)).encode(),
             {"Content-Type": "application/json"})


CHANNEL = ChannelKindSpec(name="pagerduty", label="PagerDuty",
                          config_example={"routing_key": "<32-character integration key>", "severity": "optional"},
                          render=alerts, send=send, validate=validate, secret_fields=("routing_key",))
