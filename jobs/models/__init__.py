"""Jobs, their runs, and the attempts of each run: the record of what is due and what ran.

One module per record: ``job``, ``run``, ``attempt``, ``calendar``, ``counts`` (the figures' sources),
``leases``, ``limit``, ``pings`` (the queue of check-in pings), ``quota``, ``rerun``, ``version``, ``window``; the choices are defined in ``jobs.choices`` and are importable from here too. The state machine and
every move of a run are the lifecycle's (``jobs.lifecycle.moves``).
"""

from ..choices import (
    ACTIVE_STATUSES,
    ENDED_STATUSES,
    FAILURE_END_STATUSES,
    TERMINAL_STATUSES,
    TIMED_END_STATUSES,
    UNSUCCESSFUL_END_STATUSES,
    AttemptOutcome,
    BundlePolicy,
    CatchupPolicy,
    DstRepeated,
    DstSkipped,
    OverlapPolicy,
    RunStatus,
    RunTrigger,
    ScheduleType,
)
from .attempt import JobAttempt
from .calendar import Calendar
from .counts import DeliveryCounter, EndCounts, HourCounts, JobDayFigures, JobHourCounts, RecentRuns, RunEnd
from .fields import CountField
from .job import Job
from .leases import Lease, SchedulerOutage
from .limit import Limit
from .pings import PingQueueMark
from .quota import TeamPingKey, TeamQuota
from .rerun import RunRerun
from .run import JobRun, StatusOf, idempotency_key
from .version import JobVersion, Version
from .window import Window, WindowMode

__all__ = [
    "ACTIVE_STATUSES", "ENDED_STATUSES", "FAILURE_END_STATUSES", "TERMINAL_STATUSES", "TIMED_END_STATUSES", "UNSUCCESSFUL_END_STATUSES",
    "AttemptOutcome", "BundlePolicy", "Calendar", "CatchupPolicy", "CountField", "DeliveryCounter", "DstRepeated", "DstSkipped", "EndCounts", "HourCounts", "Job", "PingQueueMark",
    "JobAttempt", "JobDayFigures", "JobVersion", "Version", "JobHourCounts", "JobRun", "Lease", "Limit", "OverlapPolicy", "RecentRuns", "RunEnd", "RunRerun",
    "RunStatus", "RunTrigger", "ScheduleType", "SchedulerOutage", "StatusOf", "TeamPingKey", "TeamQuota", "Window", "WindowMode", "idempotency_key",
]
