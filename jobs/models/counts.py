"""What the figures are kept from: the ends of runs waiting to be counted, the counts by hour, each
job's recent durations, and counters of events that leave no row."""

from django.db import models

from ..choices import TIMED_END_STATUSES
from .job import Job


class RunEnd(models.Model):
    """A run that ended and is not counted yet: one row, written in the same transaction as the end
    (``lifecycle.moves.transition``, ``lifecycle.postgres.succeed``, a run born skipped), and folded into the
    hourly counts and recent durations below by the scheduler leader (``lifecycle.rollup.fold``).

    The cheapest write the worker's success can make: on PostgreSQL the table has no index at all,
    not even its primary key (dropped by the migrations, POSTGRESQL_STORAGE), and no foreign key to
    check, so an end is one heap tuple, and two workers ending runs of the same job never wait for
    each other. Nothing looks a row up: the fold takes them in the order they lie in the table."""

    # A run ends once per rerun (jobs.lifecycle.runs.rerun folds an unfolded end first where this is a key).
    run_id = models.BigIntegerField(primary_key=True)
    job_id = models.BigIntegerField()
    status = models.CharField(max_length=16)
    ended_at = models.DateTimeField()
    seconds = models.FloatField(null=True)  # how long it ran, for the ends in TIMED_END_STATUSES

    @classmethod
    def record(cls, run, status, ended_at):
        timed = status in TIMED_END_STATUSES and run.started_at is not None and ended_at is not None
        cls.objects.create(run_id=run.pk, job_id=run.job_id, status=status, ended_at=ended_at,
                           seconds=(ended_at - run.started_at).total_seconds() if timed else None)


class EndCounts(models.Model):
    """How many runs ended in one hour, by how they ended, and how long the timed ones ran."""

    hour = models.DateTimeField()
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    timed_out = models.PositiveIntegerField(default=0)
    lost = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    timed = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0)

    COUNTERS = ("succeeded", "failed", "timed_out", "lost", "skipped", "cancelled", "timed", "seconds")

    class Meta:
        abstract = True


class JobHourCounts(EndCounts):
    """The ends of one job's runs in one hour: a job's success rate, a user's overview."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+", db_index=False)

    class Meta:
        constraints = [
            # Also the index of every read: a job's (or a user's jobs') hours since a moment.
            models.UniqueConstraint(fields=["job", "hour"], name="job_hour_counts_one_per_hour"),
        ]


class HourCounts(EndCounts):
    """The ends of every job's runs in one hour: the overview of a user who sees every job."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour"], name="hour_counts_one_per_hour")]


class RecentRuns(models.Model):
    """The last runs of a job that ended with a duration (``TIMED_END_STATUSES``), oldest first, as
    [run id, ended at (epoch seconds), seconds, status]: the sparkline and the duration chart."""

    KEPT = 100

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="+")
    points = models.JSONField(default=list)


class JobDayFigures(models.Model):
    """What became of one job's runs whose slot fell on one day (in the job's zone): the on-time
    reports (``jobs.operations.reports``) read these, never the runs. ``counts``: {measure: count},
    the measures of ``lifecycle.days``: scheduled slots that have a run, how those runs ended, how many
    started within the start deadline and finished within the SLA, the skips by their reason, and a
    duration histogram (``d:<bucket>``, every run with a duration, whatever its trigger).

    One row a job and day, keyed by the two: a run's end adds to one row, where a row a measure made
    it five rows and ten index entries (issue 46: 1,428 of a new job's 6,416 bytes of WAL a run)."""

    pk = models.CompositePrimaryKey("job_id", "day")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    counts = models.JSONField(default=dict)


class DeliveryCounter(models.Model):
    """Counts of events that leave no row of their own, such as dropped duplicate deliveries."""

    name = models.CharField(max_length=100, unique=True)
    value = models.BigIntegerField(default=0)

    @classmethod
    def increment(cls, name, by=1):
        updated = cls.objects.filter(name=name).update(value=models.F("value") + by)
        if not updated:
            obj, created = cls.objects.get_or_create(name=name, defaults={"value": by})
            if not created:
                cls.objects.filter(name=name).update(value=models.F("value") + by)

    @classmethod
    def get(cls, name):
        return cls.objects.filter(name=name).values_list("value", flat=True).first() or 0
