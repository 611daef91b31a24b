"""A version of a job: what a saved change of it made it, numbered 1, 2, ... per job.

Written by the actions that save a job (create, edit, clone, jobs apply, restore), in the
transaction of the change and its audit entry (``jobs.definitions.versions``). ``values`` is the
job as the audit trail's snapshot has it (``jobs.actions.snapshot``), without the values of secret
fields (a restore keeps the job's own); ``changes`` is the audit entry's diff from the version
before (private values shown by their keys only)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .job import Job


class JobVersion(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="versions", db_index=False)
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    author_name = models.CharField(max_length=255, blank=True, help_text="Who saved it, as the audit trail names them.")
    values = models.JSONField(default=dict)
    changes = models.JSONField(default=dict)
    detail = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["job", "-number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="job_version_one_per_number")]

    def __str__(self):
        return f"version {self.number} of job {self.job_id}"
