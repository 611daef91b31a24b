"""A job's failure streak, kept where its runs end, and the auto-pause it leads to.

Each end of a run moves the job's ``consecutive_failures`` in the transaction that ends the run
(``moves.transition``; the PostgreSQL success statement resets it in SQL, jobs.lifecycle.postgres):

- failed, timed out or lost (``FAILURE_END_STATUSES``): one more;
- succeeded: back to 0 (an UPDATE only when it was not 0 already);
- skipped or cancelled: nothing (the job's code did not run to an end: neither a failure nor a
  success).

The count is an UPDATE of the job's row, ``consecutive_failures + 1``: two runs that end at once
are counted one after the other (the second waits for the first's row lock and then adds to its
count), so no end is lost and exactly one of them reaches the job's ``pause_after_failures``. No
end reads the run history.

When the count reaches ``pause_after_failures`` while the job is enabled, the job pauses itself as
the pause action does (``definitions.jobs.pause``: ``enabled`` becomes false), with its reason
(``paused_reason``), an audit entry by the service naming the failing runs, and the ``paused``
event (notifications' rules). Resuming clears the count and the reason (``definitions.jobs.resume``).
"""

from django.db.models import F

from audit import trail
from audit.models import Action, Source

from ..choices import FAILURE_END_STATUSES, RunStatus
from ..definitions import jobs as definitions
from ..models import Job, JobRun
from . import events

AUTO_PAUSE = "auto-pause"  # who paused the job, as the audit trail names it
SHOWN_RUNS = 10  # the failing runs the reason names (the audit entry's changes list them all)


def count_end(run, status):
    """Move the failure streak of ``run``'s job for an end in ``status``, in the caller's
    transaction; pause the job when the streak reaches its ``pause_after_failures``."""
    if status == RunStatus.SUCCEEDED:
        Job.objects.filter(pk=run.job_id, consecutive_failures__gt=0).update(consecutive_failures=0)
        return
    if status not in FAILURE_END_STATUSES:
        return
    jobs = Job.objects.filter(pk=run.job_id)
    if not jobs.update(consecutive_failures=F("consecutive_failures") + 1):
        return  # the job is being deleted
    # The row is this transaction's until it commits: what is read now is the count this end made.
    failures, limit, enabled = jobs.values_list("consecutive_failures", "pause_after_failures", "enabled").get()
    if limit and enabled and failures >= limit:
        _pause(run, failures)


def _pause(run, failures):
    job = Job.objects.get(pk=run.job_id)
    failing = list(JobRun.objects.filter(job_id=job.pk, status__in=list(FAILURE_END_STATUSES))
                   .order_by("-finished_at", "-id").values_list("pk", "status")[:failures])
    runs_text = ", ".join(f"#{pk} ({status})" for pk, status in failing[:SHOWN_RUNS])
    if len(failing) > SHOWN_RUNS:
        runs_text += f" and {len(failing) - SHOWN_RUNS} more"
    reason = (f"Paused by the service after {failures} runs in a row ended in failure (pause_after_failures "
              f"is {job.pause_after_failures}): runs {runs_text}.")
    definitions.pause(job, reason=reason)
    trail.record(job, Action.PAUSE, Source.SYSTEM, actor_name=AUTO_PAUSE, run=run,
                 changes={"enabled": [True, False], "paused_reason": ["", reason],
                          "failing_runs": [None, [pk for pk, _ in failing]]},
                 detail=f"auto-pause after {failures} failures in a row: runs {runs_text}")
    events.emit(events.JOB_PAUSED, run=run, job=job, reason=reason, failures=failures)
