"""Local stand-ins of PagerDuty's Events API v2 and Opsgenie's Alert API, for the paging channels'
tests: each checks a request as the real API does (its shape, its bounds, its credential), answers
as it does (202 with the same JSON; 400 or 401 naming what is wrong), and keeps the alerts' state
by key, so a test reads what a person on call would see. No tests here."""

import json
import re
import threading
from urllib.parse import parse_qs, unquote, urlsplit

from .local_http import LocalHTTPServer, QuietHandler

PAGERDUTY_KEY = "0123456789abcdef0123456789abcdef"
OPSGENIE_KEY = "eb243592-faa2-4ba2-a551q-1afdf565c889"
SEVERITIES = {"critical", "error", "warning", "info"}


class PagingAPI(LocalHTTPServer):
    def __init__(self):
        self.requests = []  # (path, headers, body): every request, accepted or not
        self.alerts = {}  # key -> {"status": ..., "events": [what was accepted for it]}
        self.lock = threading.Lock()
        api = self

        class Handler(QuietHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with api.lock:
                    api.requests.append((self.path, dict(self.headers), raw))
                    status, answer = api.answer(self.path, self.headers, raw)
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler)

    def status(self, key):
        with self.lock:
            return self.alerts.get(key, {}).get("status")

    def statuses(self):
        with self.lock:
            return {key: alert["status"] for key, alert in self.alerts.items()}

    def accepted(self, key):
        with self.lock:
            return list(self.alerts.get(key, {}).get("events", []))

    def _move(self, key, status, document):
        alert = self.alerts.setdefault(key, {"status": None, "events": []})
        alert["status"] = status
        alert["events"].append(document)


class PagerDutyAPI(PagingAPI):
    """``POST /v2/enqueue``: the checks of https://developer.pagerduty.com/api-reference/368ae3d938c9e-send-an-event-to-pager-duty."""

    path = "/v2/enqueue"

    @property
    def endpoint(self):
        return f"{self.url}{self.path}"

    def answer(self, path, headers, raw):
        if path != self.path:
            return 404, {"status": "not found"}
        try:
            event = json.loads(raw)
        except ValueError:
            return 400, {"status": "invalid event", "message": "Event object is invalid", "errors": ["Invalid JSON"]}
        errors = []
        if not isinstance(event, dict):
            return 400, {"status": "invalid event", "message": "Event object is invalid", "errors": ["not an object"]}
        if event.get("routing_key") != PAGERDUTY_KEY:
            errors.append("'routing_key' is invalid" if event.get("routing_key") else "'routing_key' is missing")
        action = event.get("event_action")
        if action not in ("trigger", "acknowledge", "resolve"):
            errors.append("'event_action' is invalid (must be one of: trigger, acknowledge, resolve)")
        key = event.get("dedup_key")
        if key is not None and (not isinstance(key, str) or len(key) > 255):
            errors.append("'dedup_key' must be a string of at most 255 characters")
        if action in ("acknowledge", "resolve") and not key:
            errors.append("'dedup_key' is required for acknowledge and resolve")
        if action == "trigger":
            payload = event.get("payload")
            if not isinstance(payload, dict):
                errors.append("'payload' is missing")
            else:
                if not isinstance(payload.get("summary"), str) or not payload["summary"] or len(payload["summary"]) > 1024:
                    errors.append("'payload.summary' is missing or longer than 1024 characters")
                if not isinstance(payload.get("source"), str) or not payload["source"]:
                    errors.append("'payload.source' is missing")
                if payload.get("severity") not in SEVERITIES:
                    errors.append("'payload.severity' is invalid (must be one of: critical, error, warning, info)")
        if errors:
            return 400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}
        status = {"trigger": "triggered", "acknowledge": "acknowledged", "resolve": "resolved"}[action]
        current = self.alerts.get(key, {}).get("status")
        # PagerDuty drops an acknowledge or resolve of an incident that is not open, and a trigger
        # of an acknowledged one leaves it acknowledged.
        dropped = current not in ("triggered", "acknowledged") if action != "trigger" else current == "acknowledged"
        if dropped:
            status = current
        self._move(key, status, event)
        return 202, {"status": "success", "message": "Event processed", "dedup_key": key}


class OpsgenieAPI(PagingAPI):
    """``/v2/alerts``: the calls of https://docs.opsgenie.com/docs/alert-api with their checks."""

    ACTION = re.compile(r"^/v2/alerts/(?P<alias>[^/?]+)/(?P<verb>close|acknowledge)$")

    def answer(self, path, headers, raw):
        if headers.get("Authorization") != f"GenieKey {OPSGENIE_KEY}":
            return 401, {"message": "Could not authenticate", "took": 0.0, "requestId": "r"}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, {"message": "Request body is not valid JSON", "took": 0.0}
        parts = urlsplit(path)
        accepted = {"result": "Request will be processed", "took": 0.01, "requestId": "r"}
        if parts.path == "/v2/alerts":
            message, alias = body.get("message"), body.get("alias")
            if not isinstance(message, str) or not message.strip():
                return 422, {"message": "Message can not be empty.", "took": 0.0}
            if len(message) > 130 or (alias is not None and len(alias) > 512):
                return 422, {"message": "message is limited to 130 characters, alias to 512", "took": 0.0}
            if body.get("priority") not in (None, "P1", "P2", "P3", "P4", "P5"):
                return 422, {"message": "Priority should be one of [P1, P2, P3, P4, P5]", "took": 0.0}
            current = self.alerts.get(alias, {}).get("status")
            self._move(alias, current if current in ("open", "acknowledged") else "open", body)
            return 202, accepted
        match = self.ACTION.match(parts.path)
        if not match:
            return 404, {"message": "Not found", "took": 0.0}
        if parse_qs(parts.query).get("identifierType") != ["alias"]:
            return 400, {"message": "identifierType should be alias here", "took": 0.0}
        alias = unquote(match["alias"])
        current = self.alerts.get(alias, {}).get("status")
        if current is None:
            return 202, accepted  # Opsgenie answers at once and finds no alert later
        verb = match["verb"]
        status = "closed" if verb == "close" else ("acknowledged" if current == "open" else current)
        self._move(alias, status, body)
        return 202, accepted
