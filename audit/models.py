"""The audit trail: who did what to which job, workflow, channel or rule, when, from where, and what
changed; who logged in, made or revoked a token, changed a user, a group or a permission. Entries
are hash-chained (``audit.chain``)."""

from django.conf import settings
from django.db import models, router, transaction
from django.db.models import Q
from django.utils import timezone

from . import chain


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
    SNOOZE = "snooze", "snooze notifications"
    UNSNOOZE = "unsnooze", "unsnooze notifications"
    ACKNOWLEDGE = "acknowledge", "acknowledge an incident"
    ROTATE = "rotate", "rotate secrets"
    TEST_SEND = "test_send", "send a test notification"
    # Who came and went, their tokens, and the trail's own upkeep (issue 44's audit of everything).
    LOGIN = "login", "log in"
    LOGIN_FAILED = "login_failed", "failed login"
    LOGOUT = "logout", "log out"
    REVOKE = "revoke", "revoke"
    PRUNE = "prune", "prune the trail"


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
    WINDOW = "window", "maintenance window"
    # Entries about a person (logins, their groups and permissions) or a token name the user.
    USER = "user", "user"
    GROUP = "group", "group"
    TOKEN = "token", "API token"
    TRAIL = "trail", "the audit trail"


class Source(models.TextChoices):
    ADMIN = "admin", "admin"
    PAGE = "page", "pages"
    API = "api", "API"
    CLI = "cli", "command line"
    SYSTEM = "system", "the service"  # what the service did by itself (auto-pause), no person


class AuditEntryQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """Appends ``objs`` in order, chained (``audit.chain``)."""
        objs = list(objs)
        with transaction.atomic(using=self.db, savepoint=False):
            chain.link(objs, AuditEntry.locked_tail(self.db))
            return super().bulk_create(objs, *args, **kwargs)


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
    # The hash chain (audit.chain): set when the entry is appended, never by hand. The database's
    # default is for the previous release's processes during an upgrade (``locked_tail`` chains
    # what they wrote).
    prev_hash = models.CharField(max_length=64, blank=True, editable=False, default="", db_default="")
    hash = models.CharField(max_length=64, blank=True, editable=False, default="", db_default="")

    objects = AuditEntryQuerySet.as_manager()

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
            # What a user who is not staff may read of the trail besides their jobs' entries: their
            # workflows' and their own (scheduler_site.audit_api.visible_entries).
            models.Index(fields=["subject", "job_name"], name="audit_subject_name_idx"),
        ]

    def save(self, *args, **kwargs):
        """A new entry is appended at the chain's tail; an entry once written is not changed."""
        if not self._state.adding:
            raise ValueError("An audit entry is never changed once written.")
        using = kwargs.get("using") or router.db_for_write(type(self))
        # No savepoint of its own (two round trips): an entry that fails fails the caller's transaction.
        with transaction.atomic(using=using, savepoint=False):
            chain.link([self], AuditEntry.locked_tail(using))
            super().save(*args, **kwargs)

    @classmethod
    def locked_tail(cls, using):
        """The newest entry's hash ("" for the first), holding the tail until the transaction ends."""
        tail = chain.locked_tail(using, cls._meta.db_table)
        if tail:
            return tail
        # An empty trail, or entries the previous release wrote unchained during an upgrade: chain
        # them now, after the last chained one.
        unchained = list(cls.objects.using(using).filter(hash="").order_by("id"))
        if not unchained:
            return ""
        before = (cls.objects.using(using).filter(id__lt=unchained[0].pk).exclude(hash="").order_by("-id")
                  .values_list("hash", flat=True).first() or "")
        chain.link(unchained, before)
        cls.objects.using(using).bulk_update(unchained, ["prev_hash", "hash"], batch_size=2000)
        return unchained[-1].hash

    def __str__(self):
        return f"{self.actor_name} {self.action} {self.subject} {self.job_name} ({self.source})"
