"""What a message says: the template context built from a delivery's payload snapshot."""

from datetime import datetime

from django.conf import settings
from django.urls import reverse

DIGEST_LISTED = 50


def run_url(run_id):
    """The run's own page, which whoever can see the job can open (the admin is for staff only)."""
    return f"{settings.SITE_URL}{reverse('pages:run', args=[run_id])}"


def seconds_text(seconds):
    if seconds is None:
        return ""
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _duration(run):
    if run.get("started_at") and run.get("finished_at"):
        started = datetime.fromisoformat(run["started_at"])
        return (datetime.fromisoformat(run["finished_at"]) - started).total_seconds()
    return None


HEADLINES = {
    "failed": "{job} failed after {attempt} attempt(s)",
    "attempt_failed": "{job}: attempt {attempt} of {max_attempts} failed, will retry",
    "timed_out": "{job} timed out",
    "lost": "{job} was lost: its worker stopped {attempt} time(s) in a row",
    "sla_overrun": "{job} is still running after {elapsed}, expected {sla}",
    "finished_late": "{job} finished late ({status} after {duration}, expected {sla})",
    "missed": "{job} missed its run scheduled for {scheduled_for}",
    "recovered": "{job} recovered: it succeeded again",
    "too_fast": "{job} finished too fast ({status} after {duration})",
    "too_often": "{job} was pinged more often than its schedule",
    "succeeded": "{job} succeeded",
    "paused": "{job} was paused: {failures} runs in a row ended in failure",
    "acknowledged": "{job}: its incident was acknowledged by {by}",
    "test": "Test notification from the job scheduler",
}


def headline(payload):
    event, run = payload.get("event"), payload.get("run") or {}
    if event in ("scheduler_down", "scheduler_recovered"):
        return scheduler_headline(event, payload.get("scheduler") or {})
    details = payload.get("details") or {}
    return HEADLINES.get(event, "{job}: {event}").format(
        event=event, job=(payload.get("job") or {}).get("name"), attempt=run.get("attempt"),
        failures=details.get("failures"), by=details.get("by"),
        max_attempts=run.get("max_attempts"), status=run.get("status"), scheduled_for=run.get("scheduled_for"),
        elapsed=seconds_text(details.get("elapsed_seconds")),
        sla=seconds_text(payload.get("sla_seconds")), duration=seconds_text(_duration(run)))


def scheduler_headline(event, scheduler):
    last = scheduler.get("last_tick_at")
    if event == "scheduler_down":
        since = f"since {last}" if last else "ever"
        return (f"Scheduler down: no scheduler has ticked {since} (noticed at {scheduler.get('noticed_at')}); "
                "scheduled jobs are not starting")
    return f"Scheduler recovered at {scheduler.get('recovered_at')}: a scheduler ticks again"


def folded_payloads(digest):
    return [d.payload for d in digest.folded.order_by("created_at", "pk")]


def context_for(delivery):
    payload = delivery.payload or {}
    run = payload.get("run") or {}
    context = {
        "event": payload.get("event") or delivery.event,
        "headline": headline(payload),
        "job": payload.get("job") or {},
        "run": run,
        "duration": seconds_text(_duration(run)),
        "error": (run.get("error") or "")[:500],
        "run_url": run_url(run["id"]) if run.get("id") else "",
        "site_url": settings.SITE_URL,
        "scheduler": payload.get("scheduler"),
        # Why the job paused itself (the "paused" event), with the failing runs.
        "reason": (payload.get("details") or {}).get("reason", "") if payload.get("event") == "paused" else "",
        # The signed link that acknowledges the job's incident (a failure's message; notifications.incidents).
        "acknowledge_url": (payload.get("details") or {}).get("acknowledge_url", ""),
    }
    if delivery.event == "digest":
        payloads = folded_payloads(delivery)
        context["headline"] = f"{len(payloads)} more notifications in the minute from {payload.get('minute')}"
        context["items"] = [
            {"headline": headline(p), "run_url": run_url(p["run"]["id"]) if p["run"].get("id") else ""} for p in payloads[:DIGEST_LISTED]
        ]
        context["not_listed"] = max(0, len(payloads) - DIGEST_LISTED)
    return context
