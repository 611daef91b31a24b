"""A limit shared across jobs: at most so many of their runs running at once, and optionally at most
so many starts a minute. A job names one by its key (``Job.limit_key``); the claim enforces it
(jobs.lifecycle.limits)."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from .fields import CountField, Shareable

KEY_MAX_LENGTH = 100
MAX_RUNNING = 100_000
MAX_STARTS_PER_MINUTE = 10_000  # the claim keeps the last minute's starts in the row (``recent_starts``)


class Limit(Shareable):
    key = models.SlugField(
        max_length=KEY_MAX_LENGTH, unique=True,
        help_text="What jobs name in their limit_key: letters, digits, - and _ (such as warehouse).")
    max_running = CountField(
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RUNNING)],
        help_text="At most this many runs of the jobs naming this key running at once.")
    max_starts_per_minute = CountField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(MAX_STARTS_PER_MINUTE)],
        help_text="At most this many of their runs starting in any 60 seconds (by the database's clock); "
                  "empty means no rate limit.")
    description = models.TextField(blank=True)
    # The database clock's times of the starts of the last 60 seconds (only with a rate limit),
    # written by the claim while it holds the row locked: at most max_starts_per_minute of them.
    recent_starts = models.JSONField(default=list, blank=True, editable=False)
    created_at = models.DateTimeField(verbose_name="created", auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(condition=Q(max_running__gte=1), name="limit_max_running_positive"),
            models.CheckConstraint(condition=Q(max_starts_per_minute__isnull=True) | Q(max_starts_per_minute__gte=1),
                                   name="limit_max_starts_positive"),
        ]

    def __str__(self):
        return self.key
