"""Where run events enter the notification system.

``record_event`` runs inside the caller's transaction (the one that moved the run), turns the event
into ``Delivery`` rows through the rules, and publishes the send tasks only after the commit. It
never does network I/O and never raises into the caller: a broken notification setup must not fail
or roll back a run.

Incidents: a failure (``failed``/``timed_out``) of a job whose previous finished run also failed is
recorded as ``suppressed`` (the incident is already open, people have been told); the first success
after a failure adds a ``recovered`` event.

Each failure opens the job's incident (``incidents``) when none is open, and its next success
closes it; the failure's message carries the signed link that acknowledges it.

Snooze: while a job is snoozed (its ``snoozed_until`` is ahead), every delivery of its events is
recorded as ``suppressed`` with the reason in its ``last_error`` (shown on the run page), logged,
and never sent.

A delivery names the rule that made it (``blamed_rule``): a permanent error of a channel caused by
a rule that is not its owner's pauses that rule rather than the channel (``sending``).

Maintenance windows: a run whose slot or end falls inside a ``mute`` window of its job sends
nothing (``_channels_for``, through which every event of a run goes).

Flood control: once a channel has ``NOTIFY_DIGEST_THRESHOLD`` deliveries in the current minute,
further ones of that minute are recorded as ``folded`` and attached to one ``digest`` delivery for
the channel and minute, sent when the minute is over. Concurrent transactions may each pass the
threshold check, so a burst can overshoot it by a few messages.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from jobs.lifecycle.pings import NO_PING
from jobs.models import Job, JobRun, RunRerun, RunStatus, WindowMode
from jobs.models.window import window_book
from jobs.telemetry import tracing
from jobs.timing import clock

from . import incidents
from .models import Channel, Delivery, DeliveryStatus, Rule
from .queueing import enqueue, enqueue_pending

logger = logging.getLogger(__name__)

INCIDENT_EVENTS = ("failed", "timed_out")
ERROR_EXCERPT_CHARS = 2000


def on_run_event(event, run=None, job=None, **details):
    """Subscribed to the runs' events (jobs.lifecycle.events), in the transaction of the change."""
    if event == "slot_missed":
        return record_slot_missed(job, details["slot"], details["reason"])
    if event == "skipped":
        # Skipped by its start deadline or the catch-up policy: a missed slot; an overlap skip is not news.
        return record_event(run, "missed") if run.reason.startswith("missed") else 0
    if event == "failed" and run.reason == NO_PING:  # a check-in's slot that got no ping: missed too
        return record_event(run, event, **details) + record_event(run, "missed")
    if event == "succeeded" and is_too_fast(run, job):
        return record_event(run, event, **details) + record_event(
            run, "too_fast", duration_seconds=round(run.duration.total_seconds(), 3),
            min_duration_seconds=job.min_duration_seconds)
    return record_event(run, event, **details)


def is_too_fast(run, job):
    """Whether ``run`` succeeded sooner than its job's shortest run (a run with no start has no duration)."""
    return bool(job.min_duration_seconds and run.duration is not None
                and run.duration.total_seconds() < job.min_duration_seconds)


def wants_success_sql():
    """Whether a success is news (SQL over ``j``): to a rule that takes successes or recoveries, or,
    when the job has a shortest run, too_fast."""
    return (f"{rule_wants_sql(['succeeded', 'recovered'])} "
            f"OR (j.min_duration_seconds IS NOT NULL AND {rule_wants_sql(['too_fast'])})")


def on_job_paused(event, run=None, job=None, **details):
    """Subscribed to ``paused`` (jobs.lifecycle.streaks: a job paused itself after failures in a row),
    in the transaction of the run's end that made it pause: one delivery per channel of the rules
    that take ``paused`` for the job, never suppressed as an open incident is (people must hear that
    the job stopped). Its key names that run and attempt: an end is told once."""
    return record_event(run, event, **details)


def record_event(run, event, **details):
    """Record that ``event`` happened to ``run``, inside the caller's transaction.

    Events: failed, attempt_failed, timed_out, lost, succeeded (from jobs.lifecycle), sla_overrun,
    finished_late, missed (from notifications.watch). Returns the number of deliveries planned.
    """
    try:
        # A savepoint: an error in here must not break the caller's transaction.
        with transaction.atomic(), tracing.step("notify", {**tracing.run_attributes(run.pk, run.attempt),
                                                           "notification.event": event}):
            planned = _record(run, event, details, clock.now())
            tracing.annotate({"notification.deliveries": planned})
            return planned
    except Exception:
        logger.exception("could not record the %s event of run %s", event, getattr(run, "pk", None))
        return 0


def _record(run, event, details, now):

    events = [event]
    previous = _previous_outcome(run) if event in (*INCIDENT_EVENTS, "succeeded") else None
    if event == "succeeded" and previous in INCIDENT_EVENTS:
        events.append("recovered")
    suppressed = event in INCIDENT_EVENTS and previous in INCIDENT_EVENTS
    if event in INCIDENT_EVENTS:
        incident = incidents.open_for(run, now)
        if incident is not None and incident.acknowledged_at is None:
            details = {**details, "acknowledge_url": incidents.acknowledge_url(incident)}
    elif event == "succeeded":
        incidents.close_for(run, now)

    rows = []
    for name in events:
        for channel, rule in _channels_for(run, name):
            row = Delivery(
                event=name, channel=channel, rule=rule, run=run, job=run.job, created_at=now, next_attempt_at=now,
                queued_at=now, dedup_key=dedup_key(name, run, channel), payload=payload_for(run, name, details),
                status=DeliveryStatus.SUPPRESSED if suppressed else DeliveryStatus.PENDING,
            )
            if suppressed:
                row.next_attempt_at = row.queued_at = None
            rows.append(row)
    if not rows:
        return 0
    _hold_if_snoozed(rows, run.job_id, now)
    for row in rows:
        if row.status == DeliveryStatus.PENDING and _over_threshold(row.channel, now):
            _fold(row, now)
    # A repeated event (a duplicate task, a second monitor pass) hits the unique dedup_key: no-op.
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    keys = [r.dedup_key for r in rows if r.status == DeliveryStatus.PENDING]
    if keys:
        transaction.on_commit(lambda: enqueue_pending(keys))
    return len(rows)


def _hold_if_snoozed(rows, job_id, now):
    """Keep ``rows`` (the deliveries of one event of the job ``job_id``) from being sent while the
    job is snoozed (jobs.actions.jobs.snooze): recorded as suppressed, saying why, and logged."""
    until = Job.objects.filter(pk=job_id).values_list("snoozed_until", flat=True).first() if rows else None
    if until is None or until <= now:
        return
    reason = f"Not sent: the job's notifications are snoozed until {until.isoformat(timespec='seconds')}."
    for row in rows:
        row.status, row.last_error, row.next_attempt_at, row.queued_at = DeliveryStatus.SUPPRESSED, reason, None, None
    logger.info("job %s is snoozed until %s: %s not sent to %s", job_id, until.isoformat(),
                ", ".join(sorted({row.event for row in rows})), ", ".join(sorted({row.channel.name for row in rows})))


def record_slot_missed(job, slot, reason):
    """A ``missed`` event for a slot of ``job`` that has no run at all (found by the slot report):
    the deliveries name the slot instead of a run, once per slot and channel."""


    try:
        with transaction.atomic():
            now = clock.now()
            unsaved = JobRun(job=job, status=RunStatus.SKIPPED, scheduled_for=slot, reason=f"missing: {reason}")
            rows = []
            for channel, rule in _channels_for(unsaved, "missed"):
                key = f"missed:job{job.pk}:{slot:%Y%m%dT%H%M%S}:{channel.pk}"
                if Delivery.objects.filter(dedup_key=key).exists():
                    continue  # alerted already (a second look at the same slot)
                rows.append(Delivery(event="missed", channel=channel, rule=rule, run=None, job=job, created_at=now,
                                     next_attempt_at=now, queued_at=now, dedup_key=key, status=DeliveryStatus.PENDING,
                                     payload=payload_for(unsaved, "missed", {"reason": reason})))
            _hold_if_snoozed(rows, job.pk, now)
            for row in rows:
                if row.status == DeliveryStatus.PENDING and _over_threshold(row.channel, now):
                    _fold(row, now)  # a scheduler outage finds many at once
            Delivery.objects.bulk_create(rows, ignore_conflicts=True)
            keys = [row.dedup_key for row in rows if row.status == DeliveryStatus.PENDING]
            if keys:
                transaction.on_commit(lambda: enqueue_pending(keys))
            return len(rows)
    except Exception:
        logger.exception("could not record the missed slot %s of job %s", slot, job.pk)
        return 0


def on_scheduler_event(event, outage=None, **details):
    """Subscribed to ``scheduler_down`` and ``scheduler_recovered`` (the workers' watchdog, in the
    transaction that opens or closes the outage). The alert goes to every enabled rule that takes
    ``scheduler_down``, whatever its scope (every job waits for the scheduler); the recovery to the
    channels that were told of that outage. One delivery per outage, event and channel."""
    try:
        with transaction.atomic():
            now = clock.now()
            if event == "scheduler_down":
                rules = Rule.objects.filter(enabled=True, channel__enabled=True).select_related("channel")
                channels = {r.channel_id: r.channel for r in rules if "scheduler_down" in (r.events or [])}
                channels = list(channels.values())
            else:
                told = Delivery.objects.filter(event="scheduler_down", dedup_key__startswith=f"scheduler_down:{outage.pk}:")
                channels = list(Channel.objects.filter(pk__in=told.values("channel_id")))
            payload = scheduler_payload(event, outage)
            rows = [Delivery(event=event, channel=channel, created_at=now, next_attempt_at=now, queued_at=now,
                             dedup_key=f"{event}:{outage.pk}:{channel.pk}", payload=payload,
                             status=DeliveryStatus.PENDING) for channel in channels]
            Delivery.objects.bulk_create(rows, ignore_conflicts=True)
            keys = [row.dedup_key for row in rows]
            if keys:
                transaction.on_commit(lambda: enqueue_pending(keys))
            return len(rows)
    except Exception:
        logger.exception("could not record the %s event of outage %s", event, getattr(outage, "pk", None))
        return 0


def scheduler_payload(event, outage):
    return {
        "event": event,
        "job": {"id": None, "name": "(scheduler)"},
        "run": {"id": None},
        "scheduler": {"last_tick_at": _iso(outage.last_tick_at), "noticed_at": _iso(outage.noticed_at),
                      "noticed_by": outage.noticed_by, "recovered_at": _iso(outage.recovered_at)},
        "details": {},
    }


def rule_wants_sql(events):
    """SQL over the job ``j``: whether an enabled rule of an enabled channel takes one of ``events``
    for it; ``Rule.matches`` and ``_channels_for`` in SQL (keep them in step: a parity test does),
    so the worker can record a run nobody is to hear about in one statement (jobs.lifecycle.postgres)."""
    names = ", ".join("'" + event.replace("'", "''") + "'" for event in events)
    return f"""EXISTS (
    SELECT 1 FROM notifications_rule ru JOIN notifications_channel ch ON ch.id = ru.channel_id
    WHERE ru.enabled AND ch.enabled AND ru.events ?| ARRAY[{names}]::text[]
      AND (ru.scope = 'all' OR (ru.scope = 'tag' AND j.tags ? ru.tag) OR (ru.scope = 'job' AND ru.job_id = j.id)))"""


# Told once per run, whichever attempt it is at: an overrun goes on across a retry.
ONCE_PER_RUN = ("sla_overrun", "finished_late")


def dedup_key(event, run, channel):
    """Once per attempt: a rerun (jobs.lifecycle.runs.rerun) is a new attempt of the same run, and its
    end is news again."""
    if event in ONCE_PER_RUN:
        return f"{event}:{run.pk}:{channel.pk}"
    return f"{event}:{run.pk}:{run.attempt}:{channel.pk}"


def _previous_outcome(run):
    """The status of the job's last finished run created before this one (skipped and cancelled
    runs say nothing about the job's health), or None. A rerun's is how the run itself had ended."""

    outcomes = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT]
    if run.attempt > 1:  # only a rerun or a retry gets here; a rerun has its row
        rerun = RunRerun.objects.filter(run_id=run.pk).order_by("-id").values_list("previous_status", flat=True).first()
        if rerun in outcomes:
            return rerun
    # Ordered by created_at, not finished_at, so the job's history index (run_job_recent_idx)
    # finds it without sorting all the job's runs.
    previous = JobRun.objects.filter(job_id=run.job_id, status__in=outcomes, created_at__lte=run.created_at)
    return previous.exclude(pk=run.pk).order_by("-created_at", "-id").values_list("status", flat=True).first()


def _channels_for(run, event):
    """[(channel, rule)]: each channel to tell, with the rule a permanent error of its delivery is
    blamed on (``blamed_rule``); None for a follow-up. None at all for a run whose slot or end falls
    in a ``mute`` maintenance window of its job."""
    if window_book.covering(WindowMode.MUTE, run.job_id, run.scheduled_for, run.finished_at):
        return []
    if event == "finished_late":
        # The follow-up goes to whoever heard about the overrun.
        ids = Delivery.objects.filter(run=run, event="sla_overrun").values_list("channel_id", flat=True)
        return [(channel, None) for channel in Channel.objects.filter(pk__in=ids)]
    # Rules are few; matching in Python also works on SQLite, which has no JSON "contains".
    rules = Rule.objects.filter(enabled=True, channel__enabled=True).select_related("channel", "owner")
    found = {}
    for rule in rules.order_by("id"):
        if event in (rule.events or []) and rule.matches(run.job):
            found.setdefault(rule.channel_id, []).append(rule)
    return [(matched[0].channel, blamed_rule(matched)) for matched in found.values()]


def is_foreign(rule):
    """Whether ``rule`` is of someone who is neither staff nor its channel's owner: what it sends
    is not the channel owner's to answer for."""
    owner = rule.owner
    return owner is not None and not owner.is_staff and not owner.is_superuser and \
        rule.owner_id != rule.channel.owner_id


def blamed_rule(rules):
    """Of the rules that lead one event to one channel, the one its delivery answers for: a
    foreign one first (its owner chose to send this there), else the first."""
    return next((rule for rule in rules if is_foreign(rule)), rules[0])


def _minute(now):
    return now.replace(second=0, microsecond=0)


def _over_threshold(channel, now):

    sent_alone = Delivery.objects.filter(channel=channel, created_at__gte=_minute(now)).exclude(
        status__in=[DeliveryStatus.FOLDED, DeliveryStatus.SUPPRESSED]).exclude(event="digest")
    return sent_alone.count() >= settings.NOTIFY_DIGEST_THRESHOLD


def _fold(row, now):
    """Attach ``row`` to its channel's digest of this minute, creating the digest if needed."""

    minute = _minute(now)
    send_at = minute + timedelta(minutes=1)
    digest, created = Delivery.objects.get_or_create(
        dedup_key=f"digest:{row.channel.pk}:{minute:%Y%m%dT%H%M}",
        defaults={"event": "digest", "channel": row.channel, "created_at": now, "next_attempt_at": send_at,
                  "payload": {"event": "digest", "minute": minute.isoformat()}},
    )
    if created:
        transaction.on_commit(lambda: enqueue(digest.pk, eta=send_at))
    row.status = DeliveryStatus.FOLDED
    row.digest = digest
    row.next_attempt_at = row.queued_at = None


def payload_for(run, event, details):
    """A snapshot of the run at the moment of the event: what the message will say."""
    job = run.job
    return {
        "event": event,
        "job": {"id": job.pk, "name": job.name},
        "run": {
            "id": run.pk,
            "status": run.status,
            "attempt": run.attempt,
            "max_attempts": run.max_attempts,
            "scheduled_for": _iso(run.scheduled_for),
            "started_at": _iso(run.started_at),
            "finished_at": _iso(run.finished_at),
            "worker": run.worker,
            "error": (run.error or "")[:ERROR_EXCERPT_CHARS],
            "reason": run.reason,
        },
        "sla_seconds": job.sla_seconds,
        "details": {k: v for k, v in details.items() if isinstance(v, str | int | float | bool | type(None))},
    }


def _iso(value):
    return value.isoformat() if value else None
