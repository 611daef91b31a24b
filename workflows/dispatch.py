"""The scheduler's part for workflows: start a run for each due workflow and move its next slot.

Called by ``jobs.scheduler.JobScheduler.tick`` on the leader, next to ``jobs.dispatch.dispatch_due``.
"""

from django.db import transaction
from django.utils import timezone

from . import progress
from .models import Workflow, WorkflowTrigger

MAX_SLOTS_PER_TICK = 1000  # missed slots walked through for one workflow before jumping to now


def dispatch_due_workflows(now=None, batch=100):
    """The scheduler's tick for workflows: start one run for the latest due slot of each due
    workflow (older missed slots are not caught up) and move its next slot on.

    Rows are locked with SKIP LOCKED, and UNIQUE(workflow, scheduled_for) fences a second leader."""
    now = now or timezone.now()
    started = 0
    with transaction.atomic():
        due = list(Workflow.objects.filter(enabled=True, next_run_at__lte=now).order_by("next_run_at")
                   .select_related("crontab", "interval", "clocked")
                   .select_for_update(skip_locked=True, of=("self",))[:batch])
        for workflow in due:
            slot = workflow.next_run_at
            following = workflow.slot_after(slot)
            for _ in range(MAX_SLOTS_PER_TICK):
                if following is None or following > now:
                    break
                slot, following = following, workflow.slot_after(following)
            else:  # far behind (a long downtime): run this slot, go on from the first one after now
                following = workflow.slot_after(now)
            if progress.start(workflow, WorkflowTrigger.SCHEDULE, scheduled_for=slot) is not None:
                started += 1
            Workflow.objects.filter(pk=workflow.pk).update(next_run_at=following)
    return started
