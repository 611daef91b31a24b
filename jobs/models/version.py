"""A version of a job: what a saved change of it made it, numbered 1, 2, ... per job. A workflow's
versions (``workflows.models.WorkflowVersion``) are the same ``Version`` of another model.

Written by the actions that save a job (create, edit, clone, jobs apply, restore), in the
transaction of the change and its audit entry (``jobs.definitions.versions``). ``values`` is the
job as the audit trail's snapshot has it (``jobs.actions.snapshot``), without the values of secret
fields (a restore keeps the job's own); ``changes`` is the audit entry's diff from the version
before (private values shown by their keys only)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .job import Job


class Version(models.Model):
    """What a version is of whatever is versioned (a subclass adds the key to it, its ``versions``,
    named by ``of``)."""

    of = ""

    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    author_name = models.CharField(max_length=255, blank=True, help_text="Who saved it, as the audit trail names them.")
    values = models.JSONField(default=dict)
    changes = models.JSONField(default=dict)
    detail = models.CharField(max_length=255, blank=True)

    class Meta:
        abstract = True

    def __str__(self):
        return f"version {self.number} of {self.of} {getattr(self, f'{self.of}_id')}"


class JobVersion(Version):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="versions", db_index=False)
    of = "job"

    class Meta:
        ordering = ["job", "-number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="job_version_one_per_number")]
