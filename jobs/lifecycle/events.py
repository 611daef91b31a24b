"""What happened to a run, told to whoever subscribed: notifications and workflows.

The lifecycle does not import the apps that react to runs; they subscribe here when Django starts
(their ``AppConfig.ready``), and the lifecycle calls them inside the transaction of the change, so
an outbox row or a workflow step moves together with the run or not at all.

Events of a run: ``attempt_failed``, ``succeeded``, ``failed``, ``timed_out``, ``lost``,
``skipped``, ``cancelled``; the last five end the run (``ENDED``). ``slot_missed`` has no run: a
slot of a job that produced nothing (found by the periodic slot check). ``scheduler_down`` and
``scheduler_recovered`` have neither run nor job: the workers' watchdog (jobs.worker.watchdog)
opened or closed an outage of the scheduler (``outage=`` a SchedulerOutage). ``paused``: a job paused
itself after failures in a row (jobs.lifecycle.streaks: ``run=`` the run whose end did it,
``reason=``, ``failures=``).

A subscriber that can say in SQL whether it wants an event of a run (``wants_sql``: a predicate
over the run ``r`` and its job ``j``) lets the worker record a success nobody wants in a single
statement (jobs.lifecycle.postgres); one that cannot is always called.
"""

import logging
from dataclasses import dataclass

from django.db import transaction

from ..choices import ENDED_STATUSES
from ..telemetry import logs

logger = logging.getLogger(__name__)

ENDED = frozenset(ENDED_STATUSES)  # a run's end is the event of the status it ends in
# A check-in pinged more often than its schedule (jobs.lifecycle.pings: ``run=`` the extra run).
TOO_OFTEN = "too_often"
RUN_EVENTS = ENDED | {"attempt_failed", TOO_OFTEN}
SLOT_MISSED = "slot_missed"
SCHEDULER_DOWN, SCHEDULER_RECOVERED = "scheduler_down", "scheduler_recovered"
JOB_PAUSED = "paused"  # notifications.models.Event.PAUSED
OTHER_EVENTS = frozenset({SLOT_MISSED, SCHEDULER_DOWN, SCHEDULER_RECOVERED, JOB_PAUSED})


@dataclass(frozen=True)
class Subscriber:
    name: str
    handler: object  # handler(event, run=None, job=None, **details)
    events: frozenset
    wants_sql: dict  # event -> SQL predicate over r and j; an event missing here is always wanted


_subscribers = {}


def subscribe(name, handler, events, wants_sql=None):
    """Call ``handler(event, run=..., job=..., **details)`` for each of ``events`` (names, or the
    ``ENDED`` set). Subscribing again under the same name replaces the subscriber."""
    unknown = set(events) - RUN_EVENTS - OTHER_EVENTS
    if unknown:
        raise ValueError(f"unknown run events: {', '.join(sorted(unknown))}")
    _subscribers[name] = Subscriber(name, handler, frozenset(events), dict(wants_sql or {}))


def subscribers(event):
    return [s for s in _subscribers.values() if event in s.events]


def emit(event, run=None, job=None, **details):
    """Tell the subscribers of ``event``, in the caller's transaction. A subscriber that fails is
    logged and rolled back to its savepoint: it never fails or undoes the change of the run."""
    for subscriber in subscribers(event):
        try:
            with transaction.atomic(), logs.about(run):
                subscriber.handler(event, run=run, job=job if job is not None else getattr(run, "job", None),
                                   **details)
        except Exception:
            logger.exception("subscriber %s failed on the %s event of run %s", subscriber.name, event,
                             getattr(run, "pk", None))


def wanted_sql(event):
    """SQL (over ``r`` and ``j``) that is true when a subscriber wants ``event`` of the run; None
    when some subscriber cannot say in SQL (so the event is always wanted), "FALSE" when nobody
    subscribed."""
    predicates = []
    for subscriber in subscribers(event):
        if event not in subscriber.wants_sql:
            return None
        predicates.append(f"({subscriber.wants_sql[event]})")
    return " OR ".join(predicates) if predicates else "FALSE"
