"""The audit trail: who did what to which job, workflow, channel or rule, when, from where, and what
changed."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Action(models.TextChoices):
    CREATE = "create", "create"
    CHANGE = "change", "change"
    PAUSE = "pause", "pause"
    RESUME = "resume", "resume"
    DELETE = "delete", "delete"
    RUN_NOW = "run_now", "run now"
    CANCEL = "cancel", "cancel a run"
    BACKFILL = "backfill", "backfill"
    RERUN = "rerun", "rerun"
    ROTATE = "rotate", "rotate secrets"


class Subject(models.TextChoices):
    """What an entry is about. Entries about a job also link it (``job``); the others keep its name."""

    JOB = "job", "job"
    WORKFLOW = "workflow", "workflow"
    CHANNEL = "channel", "channel"
    RULE = "rule", "rule"
    SECRETS = "secrets", "secrets"
    LIMIT = "limit", "limit"
    CALENDAR = "calendar", "calendar"
    QUOTA = "quota", "team quota"


class Source(models.TextChoices):
    ADMIN = "admin", "admin"
    PAGE = "page", "pages"
    API = "api", "API"
    CLI = "cli", "command line"
    SYSTEM = "system", "the service"  # what the service did by itself (auto-pause), no person


class AuditEntry(models.Model):
    # The job's name is kept as text so an entry outlives the job it is about (a delete).
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="audit")
    job_name = models.CharField(max_length=200, help_text="The name of what the entry is about (see subject).")
    subject = models.CharField(max_length=16, choices=Subject.choices, default=Subject.JOB)
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=255, help_text="The user's name, or the OS user on the command line.")
    source = models.CharField(max_length=8, choices=Source.choices)
    remote_addr = models.CharField(max_length=255, blank=True,
                                   help_text="The client's address, or the host on the command line.")
    created_at = models.DateTimeField(default=timezone.now)
    changes = models.JSONField(default=dict, blank=True, help_text="{field: [old, new]}")
    run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    detail = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"
        constraints = [
            models.CheckConstraint(condition=Q(action__in=Action.values), name="audit_action_valid"),
            models.CheckConstraint(condition=Q(source__in=Source.values), name="audit_source_valid"),
            models.CheckConstraint(condition=Q(subject__in=Subject.values), name="audit_subject_valid"),
        ]
        indexes = [
            # A job's trail, newest first (the job page), and its pause/resume history (slot accounting):
            # AuditEntry.objects.filter(job=job).order_by("-created_at").
            models.Index(fields=["job", "-created_at"], name="audit_job_recent_idx"),
            # Retention: AuditEntry.objects.filter(created_at__lt=before), and the admin's list.
            models.Index(fields=["created_at"], name="audit_created_idx"),
        ]

    def __str__(self):
        return f"{self.actor_name} {self.action} {self.subject} {self.job_name} ({self.source})"
