"""The choices of the records, each defined once: a run's statuses and their groups, a job's
schedules and policies, what started a run, how an attempt ended. Whatever asks "has this run
ended?" imports ``TERMINAL_STATUSES`` (or ``ENDED_STATUSES``, the same statuses as strings) from here."""

from django.db import models


class ScheduleType(models.TextChoices):
    CRON = "cron", "Cron"
    INTERVAL = "interval", "Fixed interval"
    ONCE = "once", "Once"
    MANUAL = "manual", "Manual only"


class CatchupPolicy(models.TextChoices):
    NONE = "none", "Skip missed slots"
    LATEST = "latest", "Run the most recent missed slot"
    ALL = "all", "Run every missed slot (bounded)"


class OverlapPolicy(models.TextChoices):
    ALLOW = "allow", "Run both"
    SKIP = "skip", "Skip the new slot"
    QUEUE = "queue", "Start the new slot when the earlier run ends"
    REPLACE = "replace", "Cancel the earlier run, start the new slot"


class BundlePolicy(models.TextChoices):
    """Whether a job's runs may share a message with other short runs (jobs.lifecycle.bundles)."""
    AUTO = "auto", "Unless its recent runs are long (a new job is bundled)"
    SHORT = "short", "The same as auto (a new job is bundled)"
    NEVER = "never", "Never: each run its own message"


class DstSkipped(models.TextChoices):
    """What a cron slot whose wall-clock time the clocks skip (spring forward) does."""
    SHIFT = "shift", "Run it shifted forward by the gap"
    SKIP = "skip", "Do not run it"


class DstRepeated(models.TextChoices):
    """What a cron slot whose wall-clock time the clocks read twice (fall back) does."""
    FIRST = "first", "Run it once, at its first occurrence"
    SECOND = "second", "Run it once, at its second occurrence"
    BOTH = "both", "Run it at both occurrences"


class RunStatus(models.TextChoices):
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


# The statuses that end a run: a run never leaves one.
TERMINAL_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
     RunStatus.CANCELLED}
)
# The same, as plain strings in RunStatus's order: the lifecycle's events that end a run, the rollup's
# SQL parameters and counters, the pages' columns of ended runs.
ENDED_STATUSES = tuple(status.value for status in RunStatus if status in TERMINAL_STATUSES)
ACTIVE_STATUSES = frozenset({RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING})
# The ends whose duration the pages chart (a run that was skipped, cancelled or lost has none worth it).
TIMED_END_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT)
# Where a run ends when it did not succeed.
UNSUCCESSFUL_END_STATUSES = [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST, RunStatus.SKIPPED,
                             RunStatus.CANCELLED]


# What the runs' indexes see of a status (JobRun.phase, a column the database computes from it): the
# same for queued and running, so a claim changes no indexed column and PostgreSQL updates the row
# in place (a HOT update: no index written), and nothing for a success, which leaves every partial index
# on it. Every other status is its own phase.
LIVE_PHASE = "live"
LIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
ACTIVE_PHASES = (RunStatus.PENDING.value, LIVE_PHASE, RunStatus.RETRYING.value)  # run_active_idx


def phase_of(status):
    if status in LIVE_STATUSES:
        return LIVE_PHASE
    return None if status == RunStatus.SUCCEEDED else str(status)


# The ends that make a job's failure streak longer (auto-pause, jobs.lifecycle.streaks); a success
# ends the streak, and skipped or cancelled runs (the job's code did not run to an end) leave it as it is.
FAILURE_END_STATUSES = (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)


class RunTrigger(models.TextChoices):
    SCHEDULE = "schedule"
    MANUAL = "manual"
    BACKFILL = "backfill"
    WORKFLOW = "workflow"  # a step of a workflow run (workflows.progress)
    PING = "ping"  # a check-in's ping that belongs to no slot of its own (jobs.lifecycle.pings)


class AttemptOutcome(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
