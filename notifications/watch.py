"""Events nobody reports by themselves, found by looking at the runs: SLA overruns (a run still
going past ``job.sla_seconds``), their follow-ups once the run ends, and missed schedule slots.

``check`` is meant for the monitor (on the leader); every event it records is deduplicated per run
and channel, so running it twice, or on two nodes, alerts once.
"""

import logging
from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from jobs.models import TERMINAL_STATUSES, JobRun, RunStatus

from .models import Delivery, Rule
from .outbox import record_event

logger = logging.getLogger(__name__)

# Skipped runs older than this are not looked at again (rules added later do not alert about them).
MISSED_LOOKBACK = timedelta(hours=24)
BATCH = 500


def check(now=None):
    now = now or timezone.now()
    report = {
        "sla_overrun": alert_sla_overruns(now),
        "finished_late": follow_up_late_finishes(),
        "missed": alert_missed(now),
    }
    if any(report.values()):
        logger.info("notifications watch: %s", report)
    return report


def _wanted(event):
    return any(event in (rule.events or []) for rule in Rule.objects.filter(enabled=True, channel__enabled=True))


def _has_delivery(event):
    return Exists(Delivery.objects.filter(run=OuterRef("pk"), event=event))


def alert_sla_overruns(now):
    if not _wanted("sla_overrun"):
        return 0
    running = (
        JobRun.objects.filter(status=RunStatus.RUNNING, job__sla_seconds__isnull=False, started_at__isnull=False)
        .exclude(_has_delivery("sla_overrun")).select_related("job")
    )
    alerted = 0
    for run in running[:BATCH]:
        elapsed = (now - run.started_at).total_seconds()
        if elapsed <= run.job.sla_seconds:
            continue
        if record_event(run, "sla_overrun", elapsed_seconds=round(elapsed), sla_seconds=run.job.sla_seconds):
            alerted += 1
    return alerted


def follow_up_late_finishes():
    overrun_without_follow_up = Exists(
        Delivery.objects.filter(run=OuterRef("pk"), event="sla_overrun").exclude(
            Exists(Delivery.objects.filter(run=OuterRef("run"), channel=OuterRef("channel"), event="finished_late"))
        )
    )
    finished = JobRun.objects.filter(overrun_without_follow_up, status__in=list(TERMINAL_STATUSES)).select_related("job")
    followed = 0
    for run in finished[:BATCH]:
        if record_event(run, "finished_late"):
            followed += 1
    return followed


def alert_missed(now):
    if not _wanted("missed"):
        return 0
    skipped = (
        JobRun.objects.filter(status=RunStatus.SKIPPED, reason__startswith="missed",
                              created_at__gte=now - MISSED_LOOKBACK)
        .exclude(_has_delivery("missed")).select_related("job").order_by("created_at")
    )
    alerted = 0
    for run in skipped[:BATCH]:
        if record_event(run, "missed"):
            alerted += 1
    return alerted
