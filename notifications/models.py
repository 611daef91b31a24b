"""Channels (where alerts go), rules (which run events go to which channel) and deliveries (one
row per message to send: an outbox, written in the same transaction as the run event)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobs.models.fields import Owned, Shareable

from . import channel_secrets, channels


class Event(models.TextChoices):
    FAILED = "failed", "Run failed (final)"
    ATTEMPT_FAILED = "attempt_failed", "Attempt failed (will retry)"
    TIMED_OUT = "timed_out", "Run timed out"
    LOST = "lost", "Run lost (its workers kept dying)"
    SLA_OVERRUN = "sla_overrun", "Still running past its SLA"
    FINISHED_LATE = "finished_late", "Finished after overrunning its SLA"
    MISSED = "missed", "Scheduled run missed (a check-in: no ping within the grace time)"
    TOO_FAST = "too_fast", "Run succeeded sooner than the job's shortest run (min_duration_seconds)"
    TOO_OFTEN = "too_often", "Check-in pinged more often than its schedule"
    RECOVERED = "recovered", "Recovered after a failure"
    SUCCEEDED = "succeeded", "Run succeeded"
    PAUSED = "paused", "Job paused itself after failures in a row (auto-pause)"
    ACKNOWLEDGED = "acknowledged", "Incident acknowledged by a person"
    SCHEDULER_DOWN = "scheduler_down", "Scheduler down (no scheduler ticks), and its recovery"
    SCHEDULER_RECOVERED = "scheduler_recovered", "Scheduler recovered"
    DIGEST = "digest", "Digest of many notifications"
    TEST = "test", "Test notification"


# What a rule can subscribe to; digests and tests are made by the system, not by rules, a
# scheduler's recovery goes to the channels told that it was down, and an acknowledgement to the
# channels told of the incident.
RULE_EVENTS = [(value, label) for value, label in Event.choices
               if value not in ("digest", "test", "scheduler_recovered", "acknowledged")]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    GIVEN_UP = "given_up"
    FOLDED = "folded", "Folded into a digest"
    SUPPRESSED = "suppressed", "Suppressed (incident already open, or the job snoozed)"


class Channel(Shareable):
    name = models.CharField(max_length=200, unique=True)  # a file names channels (notifications.as_code)
    # The registered kinds (notifications.channels), asked when a channel is checked: a kind added to
    # NOTIFICATION_CHANNEL_KINDS needs no migration, so the database does not list them.
    kind = models.CharField(max_length=channels.NAME_MAX_LENGTH, choices=channels.choices)
    config = models.JSONField(default=dict, blank=True)  # what it takes: each kind's config_example
    enabled = models.BooleanField(default=True)
    last_error = models.TextField(blank=True)
    disabled_reason = models.TextField(blank=True, help_text="Set when a permanent error disabled the channel.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    def save(self, *args, **kwargs):
        # Secret values never reach the database in clear, whichever interface saves the channel.
        self.config = channel_secrets.sealed(self.kind, self.config)
        super().save(*args, **kwargs)

    def clean(self):
        config = self.config if isinstance(self.config, dict) else None
        if config is None:
            raise ValidationError({"config": "Must be a JSON object."})
        try:
            config = channel_secrets.opened(self.kind, config)
        except channel_secrets.SecretsUnavailable as exc:
            raise ValidationError({"config": f"{exc} Give the secret values again."}) from None
        spec = channels.get(self.kind)
        if spec is not None:  # an unknown kind is refused by the field's choices
            try:
                spec.validate(config)
            except ValidationError as exc:
                raise ValidationError({"config": exc.messages}) from None
        channel_secrets.sealed(self.kind, config)  # refused without a key to encrypt with


class RuleScope(models.TextChoices):
    ALL = "all", "All jobs"
    TAG = "tag", "Jobs with a tag"
    JOB = "job", "One job"


class Rule(Owned):
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="rules")
    events = models.JSONField(default=list, help_text="Event names, e.g. [\"failed\", \"timed_out\"].")
    scope = models.CharField(max_length=8, choices=RuleScope.choices, default=RuleScope.ALL)
    tag = models.CharField(max_length=100, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    enabled = models.BooleanField(default=True)
    # Set when a permanent error of a channel that is not the rule owner's was caused by what this
    # rule sent (notifications.sending): the rule stops, the channel stays on for everyone else.
    # db_default: the previous release's processes make rules without it while an upgrade runs.
    paused_reason = models.TextField(blank=True, default="", db_default="",
                                     help_text="Why the service paused (disabled) the rule.")

    class Meta:
        constraints = [
            models.CheckConstraint(
                name="rule_scope_has_its_target",
                condition=Q(scope=RuleScope.ALL) | Q(scope=RuleScope.TAG) & ~Q(tag="")
                | Q(scope=RuleScope.JOB, job__isnull=False),
            ),
        ]

    def __str__(self):
        target = {"all": "all jobs", "tag": f"tag {self.tag}", "job": f"job {self.job}"}[self.scope]
        return f"{', '.join(self.events)} of {target} → {self.channel.name}"

    def clean(self):
        allowed = {value for value, _ in RULE_EVENTS}
        if not isinstance(self.events, list) or not self.events or not set(self.events) <= allowed:
            raise ValidationError({"events": f"A non-empty list of: {', '.join(sorted(allowed))}."})
        if self.scope == RuleScope.TAG and not self.tag:
            raise ValidationError({"tag": "Name the tag."})
        if self.scope == RuleScope.JOB and not self.job_id:
            raise ValidationError({"job": "Pick the job."})

    def matches(self, job):
        if self.scope == RuleScope.TAG:
            return self.tag in (job.tags or [])
        if self.scope == RuleScope.JOB:
            return self.job_id == job.pk
        return True


class Delivery(models.Model):
    event = models.CharField(max_length=32, choices=Event.choices)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    # When to send next; while "sending", when the claim expires (the sender died).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When a send task was last published for it; send_due publishes again only after a while.
    queued_at = models.DateTimeField(null=True, blank=True)
    dedup_key = models.CharField(max_length=200, unique=True)
    payload = models.JSONField(default=dict)
    digest = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="folded")
    # The rule that made it (of those that lead the event to the channel, one that is not the
    # channel owner's first): whose content a permanent error is blamed on.
    rule = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.CheckConstraint(condition=Q(status__in=DeliveryStatus.values), name="delivery_status_valid"),
        ]
        indexes = [
            # sending.send_due: Delivery.objects.filter(status__in=[pending, sending],
            # next_attempt_at__lte=now); only unfinished deliveries are in the index.
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due_idx",
                condition=Q(status__in=["pending", "sending"]),
            ),
            # Flood control counts a channel's deliveries of the current minute:
            # Delivery.objects.filter(channel=..., created_at__gte=minute_start).
            models.Index(fields=["channel", "created_at"], name="delivery_channel_recent_idx"),
            # watch.check asks whether a run already has a delivery of an event:
            # Delivery.objects.filter(run=OuterRef("pk"), event="sla_overrun").
            models.Index(fields=["run", "event"], name="delivery_run_event_idx"),
        ]

    def __str__(self):
        return f"{self.event} → {self.channel.name} ({self.status})"


class Incident(models.Model):
    """A job's failure streak as the people told of it see it: opened by a failure (``failed``,
    ``timed_out``) of a job with none open, closed by its next success (notifications.outbox), and
    acknowledged at most once in between by a person (notifications.actions.acknowledge)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("jobs.JobRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                            help_text="The run whose failure opened it.")
    opened_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    acknowledged_by_name = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            # One open incident per job; the outbox opens one with INSERT … ON CONFLICT DO NOTHING
            # and finds it (job_id, closed_at IS NULL) through this index.
            models.UniqueConstraint(fields=["job"], condition=Q(closed_at__isnull=True), name="incident_one_open_per_job"),
        ]

    def __str__(self):
        state = "closed" if self.closed_at else ("acknowledged" if self.acknowledged_at else "open")
        return f"incident {self.pk} of job {self.job_id} ({state})"
