"""A team's quotas: a Django group is a team, and staff may bound what all its members together hold
and start. An empty field leaves that quota off for the team (each member keeps their own, from
the settings). Counted by ``jobs.actions.quotas``."""

from django.core.validators import MaxValueValidator
from django.db import models

from .fields import CountField

MAX_QUOTA = 1_000_000_000
FIELDS = ("max_jobs", "max_workflows", "max_runs_per_hour", "max_runs_in_flight")


def _quota(help_text):
    return CountField(null=True, blank=True, validators=[MaxValueValidator(MAX_QUOTA)], help_text=help_text)


class TeamQuota(models.Model):
    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, related_name="quota",
                                 verbose_name="team")
    max_jobs = _quota("At most this many jobs of the team (its group's), together; empty: no team bound.")
    max_workflows = _quota("At most this many workflows of the team, together; empty: no team bound.")
    max_runs_per_hour = _quota(
        "At most this many runs of the team's jobs started by its members (run now, backfill, workflow runs) "
        "in any hour; empty: no team bound.")
    max_runs_in_flight = _quota(
        "At most this many runs of the team's jobs not yet ended; empty: no team bound.")
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["group__name"]
        verbose_name = "team quota"

    def __str__(self):
        return f"quotas of {self.group.name}"
