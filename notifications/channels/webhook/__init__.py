"""Generic webhooks: a JSON document, signed with HMAC-SHA256 when the channel has a secret.

Body (UTF-8 JSON)::

    {"event": "failed",
     "job": {"id": 7, "name": "nightly-report"},
     "run": {"id": 42, "status": "failed", "attempt": 3, "scheduled_for": "<ISO 8601>",
             "started_at": "<ISO 8601>|null", "finished_at": "<ISO 8601>|null", "error": "...",
             "url": "<SITE_URL>/runs/42/|null"},
     "sent_at": "<ISO 8601>"}

A digest carries ``"runs": [{"event", "job", "run"}, ...]`` instead of ``job`` and ``run``.
``scheduler_down`` and ``scheduler_recovered`` carry ``"scheduler": {"last_tick_at", "noticed_at",
"noticed_by", "recovered_at"}`` (ISO 8601 or null), with ``job`` ``{"id": null, "name": "(scheduler)"}``.
``paused`` (a job paused itself) carries ``"paused": {"reason": "...", "failures": 3}``, its ``run``
the failed run that made the job pause. ``failed`` and ``timed_out`` carry ``"acknowledge_url"``
while the job's incident is not acknowledged (a signed link; opening it needs a login);
``acknowledged`` (a person acknowledged it) carries ``"acknowledged": {"by": "...", "at": "<ISO 8601>"}``,
its ``run`` the failed run that opened the incident.
Header ``X-Signature: sha256=<hex>`` is HMAC-SHA256(secret, raw body): verify it over the bytes
received, before parsing them.
"""

import hashlib
import hmac
import json

from django.core.exceptions import ValidationError
from django.utils import timezone

from ...render import folded_payloads, run_url
from ..base import ChannelKindSpec
from ..http import check_url, post

RUN_FIELDS = ("id", "status", "attempt", "scheduled_for", "started_at", "finished_at", "error")


def body_for(delivery, now=None):
    sent_at = (now or timezone.now()).isoformat()
    if delivery.event == "digest":
        runs = [_summary(p) for p in folded_payloads(delivery)]
        return {"event": "digest", "runs": runs, "sent_at": sent_at}
    return {**_summary(delivery.payload), "sent_at": sent_at}


def _summary(payload):
    run = payload.get("run") or {}
    summary = {"event": payload.get("event"), "job": payload.get("job"),
               "run": {**{k: run.get(k) for k in RUN_FIELDS}, "url": run_url(run["id"]) if run.get("id") else None}}
    if "scheduler" in payload:
        summary["scheduler"] = payload["scheduler"]
    details = payload.get("details") or {}
    if payload.get("event") == "paused":
        summary["paused"] = {"reason": details.get("reason"), "failures": details.get("failures")}
    if payload.get("event") == "acknowledged":
        summary["acknowledged"] = {"by": details.get("by"), "at": details.get("at")}
    if details.get("acknowledge_url"):
        summary["acknowledge_url"] = details["acknowledge_url"]
    return summary


def signature(secret, body):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def validate(config):
    check_url(config)
    if "secret" in config and not isinstance(config["secret"], str):
        raise ValidationError("The webhook secret must be a string.")


def send(config, document):
    body = json.dumps(document).encode()
    headers = {"Content-Type": "application/json"}
    if config.get("secret"):
        headers["X-Signature"] = signature(config["secret"], body)
    post(config["url"], body, headers)


CHANNEL = ChannelKindSpec(name="webhook", label="Webhook",
                          config_example={"url": "https://...", "secret": "optional, signs the body"},
                          render=body_for, send=send, validate=validate, secret_fields=("secret",))
