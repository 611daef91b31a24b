"""An attempt of a run: one try on one worker, with its outcome."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..choices import AttemptOutcome, RunStatus
from .run import JobRun


class JobAttempt(models.Model):
    # run_id lookups use attempt_one_per_number (run, number).
    run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING)
    task_id = models.CharField(max_length=255)
    worker = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="attempt_one_per_number"),
            models.CheckConstraint(condition=Q(outcome__in=AttemptOutcome.values), name="attempt_outcome_valid"),
        ]
        indexes = [
            # The overview's recent workers (seen_since). No index on heartbeat_at: a heartbeat would
            # then write every index of the table, each few seconds of each running attempt.
            models.Index(fields=["started_at"], name="attempt_started_idx"),
        ]

    def __str__(self):
        return f"attempt {self.number} of run {self.run_id}"

    @classmethod
    def seen_since(cls, since, *fields):
        """``fields`` of the attempts a worker started since ``since`` or runs now (its heartbeats
        keep it alive), without repeats: the workers seen lately."""
        started = cls.objects.filter(started_at__gte=since)
        running = cls.objects.filter(outcome=AttemptOutcome.RUNNING,
                                     run__in=JobRun.objects.filter(status=RunStatus.RUNNING).values("pk"))
        return {row for attempts in (started, running)
                for row in attempts.exclude(worker="").order_by().values_list(*fields).distinct()}
