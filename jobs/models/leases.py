"""Who holds what: the named leases (the scheduler's leadership, the retention pass) and the
scheduler's outages the workers noticed."""

from django.db import models
from django.db.models import Q


class Lease(models.Model):
    """A named lease that one process holds at a time: the scheduler's leadership, the retention pass.

    Taken, renewed and released with conditional updates timed by the database clock (jobs/coordination/leases.py).
    Every taking raises ``epoch``, and work done under the lease checks its epoch in its own
    transaction, so a holder that another process replaced can never commit.
    """

    name = models.CharField(max_length=200, primary_key=True)
    holder = models.CharField(max_length=255, blank=True)
    epoch = models.BigIntegerField(default=0)
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    # When the scheduler leader last finished a housekeeping pass (the metrics' last tick).
    last_tick_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(epoch__gte=0), name="lease_epoch_not_negative")]

    def __str__(self):
        return f"{self.name} (epoch {self.epoch}, {self.holder or 'free'})"


class SchedulerOutage(models.Model):
    """A spell in which no scheduler ticked for ``JOBS_SCHEDULER_STALE_SECONDS``, noticed by the
    workers' watchdog (jobs/worker/watchdog.py), which opens one row per outage (its alert) and
    closes it when a scheduler ticks again (its recovery notice). Times are the database's."""

    # The leader's last tick before the outage (None: no scheduler had ever ticked).
    last_tick_at = models.DateTimeField(null=True, blank=True)
    noticed_at = models.DateTimeField()
    noticed_by = models.CharField(max_length=255, blank=True)
    recovered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-noticed_at", "-id"]
        indexes = [models.Index(fields=["noticed_at"], name="outage_open_idx",
                                condition=Q(recovered_at__isnull=True))]

    def __str__(self):
        state = f"recovered {self.recovered_at:%Y-%m-%d %H:%M:%S}" if self.recovered_at else "open"
        return f"scheduler outage noticed {self.noticed_at:%Y-%m-%d %H:%M:%S} ({state})"
