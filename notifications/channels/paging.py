"""What the paging kinds (``pagerduty``, ``opsgenie``) share: one alert per job, kept open by its
failures and closed by its recovery, named by a key of the job (PagerDuty's ``dedup_key``,
Opsgenie's ``alias``), so a second failure of an open incident adds to the alert rather than
opening another one.

``alerts(delivery)`` is such a kind's message: a list of ``Alert``, each to open (``trigger``),
acknowledge or close (``resolve``) the alert of one key. A digest is the alerts of what it folds
(paging tools deduplicate by key themselves, so a flood is no flood there); a test opens the test
alert and closes it again.
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from ..render import folded_payloads, headline, run_url

TRIGGER, ACKNOWLEDGE, RESOLVE = "trigger", "acknowledge", "resolve"
RESOLVING_EVENTS = frozenset({"recovered", "succeeded", "scheduler_recovered"})
ACKNOWLEDGING_EVENTS = frozenset({"acknowledged"})
# Events that warn of trouble to come rather than say the job failed.
WARNING_EVENTS = frozenset({"attempt_failed", "sla_overrun", "finished_late"})
ERROR_EXCERPT_CHARS = 1000


@dataclass(frozen=True)
class Alert:
    action: str  # trigger, acknowledge or resolve
    key: str  # the job's alert: PagerDuty's dedup_key, Opsgenie's alias
    event: str
    summary: str
    job_name: str = ""
    link: str = ""  # the run's page
    details: dict = None  # what a trigger carries besides its summary
    acknowledge_url: str = ""  # the signed link that acknowledges the job's incident here

    @property
    def warning(self):
        return self.event in WARNING_EVENTS


def source():
    """Where the alerts come from, as a paging tool shows it: this service's host."""
    return urlsplit(settings.SITE_URL).netloc or settings.SITE_URL


def alert_key(payload):
    """The key of the alert ``payload`` belongs to: one per job on this service (the scheduler's own
    outages have one too, and the test alert)."""
    event, job_id = payload.get("event"), (payload.get("job") or {}).get("id")
    if event in ("scheduler_down", "scheduler_recovered"):
        name = "scheduler"
    elif event == "test":
        name = "test"
    else:
        name = f"job-{job_id}"
    return f"job-scheduler/{source()}/{name}"


def action_of(event):
    if event in RESOLVING_EVENTS:
        return RESOLVE
    if event in ACKNOWLEDGING_EVENTS:
        return ACKNOWLEDGE
    return TRIGGER


def alert_of(payload):
    event, run = payload.get("event"), payload.get("run") or {}
    details = {key: run.get(key) for key in ("id", "status", "attempt", "scheduled_for", "finished_at", "worker")
               if run.get(key) not in (None, "")}
    if run.get("error"):
        details["error"] = run["error"][:ERROR_EXCERPT_CHARS]
    if run.get("reason"):
        details["reason"] = run["reason"]
    extra = payload.get("details") or {}
    return Alert(action=action_of(event), key=alert_key(payload), event=event, summary=headline(payload),
                 job_name=(payload.get("job") or {}).get("name") or "", details=details,
                 link=run_url(run["id"]) if run.get("id") else "", acknowledge_url=extra.get("acknowledge_url", ""))


def alerts(delivery):
    if delivery.event == "digest":
        return [alert_of(payload) for payload in folded_payloads(delivery)]
    alert = alert_of({**(delivery.payload or {}), "event": delivery.event})
    if delivery.event == "test":
        return [alert, Alert(action=RESOLVE, key=alert.key, event="test", summary=alert.summary)]
    return [alert]
