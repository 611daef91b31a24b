"""A rerun of a finished run: who ran it again as itself, when, and how it had ended.

The run keeps its slot, idempotency key and earlier attempts (``jobs.lifecycle.runs.rerun``); this
row is what the quota of runs started in an hour counts for it (the run's own ``created_at`` is its
birth, long ago), and what notifications compare the rerun's end with."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from ..choices import RunStatus
from .run import JobRun


class RunRerun(models.Model):
    run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="reruns")
    attempt = models.PositiveIntegerField(help_text="The rerun's first attempt.")
    previous_status = models.CharField(max_length=16, choices=RunStatus.choices)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                           related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # The quota of runs a user started in the last hour (jobs.actions.quotas).
            models.Index(fields=["by", "-created_at"], name="rerun_by_recent_idx", condition=models.Q(by__isnull=False)),
        ]

    def __str__(self):
        return f"rerun of run {self.run_id} at attempt {self.attempt}"
