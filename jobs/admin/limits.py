"""Limits shared across jobs in the admin (``jobs.resources.LIMITS``): with how many runs of their
jobs run and wait now, and how many jobs name them."""

from django.contrib import admin

from ..lifecycle import limits
from ..models import Job
from ..resources import LIMITS
from .through_actions import ResourceAdmin


@admin.register(LIMITS.model)
class LimitAdmin(ResourceAdmin):
    resource = LIMITS
    fields = (*LIMITS.file.fields, "owner")

    @admin.display(description="running now")
    def running(self, limit):
        return limits.running_count(limit.key)

    @admin.display(description="waiting now")
    def waiting(self, limit):
        return limits.waiting(limit.key).count()

    @admin.display(description="jobs naming it")
    def jobs(self, limit):
        return Job.objects.filter(limit_key=limit.key).count()
