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


def headline(payload):
    event, job, run = payload.get("event"), (payload.get("job") or {}).get("name"), payload.get("run") or {}
    details = payload.get("details") or {}
    sla = seconds_text(payload.get("sla_seconds"))
    if event == "failed":
        return f"{job} failed after {run.get('attempt')} attempt(s)"
    if event == "attempt_failed":
        return f"{job}: attempt {run.get('attempt')} of {run.get('max_attempts')} failed, will retry"
    if event == "timed_out":
        return f"{job} timed out"
    if event == "lost":
        return f"{job} was lost: its worker stopped {run.get('attempt')} time(s) in a row"
    if event == "sla_overrun":
        return f"{job} is still running after {seconds_text(details.get('elapsed_seconds'))}, expected {sla}"
    if event == "finished_late":
        return f"{job} finished late ({run.get('status')} after {seconds_text(_duration(run))}, expected {sla})"
    if event == "missed":
        return f"{job} missed its run scheduled for {run.get('scheduled_for')}"
    if event == "recovered":
        return f"{job} recovered: it succeeded again"
    if event == "succeeded":
        return f"{job} succeeded"
    if event in ("scheduler_down", "scheduler_recovered"):
        return scheduler_headline(event, payload.get("scheduler") or {})
    if event == "test":
        return "Test notification from the job scheduler"
    return f"{job}: {event}"


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
    }
    if delivery.event == "digest":
        payloads = folded_payloads(delivery)
        context["headline"] = f"{len(payloads)} more notifications in the minute from {payload.get('minute')}"
        context["items"] = [
            {"headline": headline(p), "run_url": run_url(p["run"]["id"]) if p["run"].get("id") else ""} for p in payloads[:DIGEST_LISTED]
        ]
        context["not_listed"] = max(0, len(payloads) - DIGEST_LISTED)
    return context
