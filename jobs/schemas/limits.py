"""A limit shared across jobs (``jobs.models.Limit``) as the API answers it and as the API and the
``limits:`` section of jobs files both check it (``LimitSerializer``): with how many runs of its jobs
run and wait now, and which jobs name it."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..actions import limits as actions
from ..lifecycle import limits
from ..models import Job, Limit
from .owned import OwnedSerializer


class LimitSerializer(OwnedSerializer):
    running = serializers.SerializerMethodField(help_text="Runs of its jobs running now.")
    waiting = serializers.SerializerMethodField(help_text="Runs of its jobs waiting for room.")
    jobs = serializers.SerializerMethodField(help_text="How many jobs name it (limit_key), yours or not.")
    job_names = serializers.SerializerMethodField(help_text="The names of (up to 10 of) the jobs naming it that "
                                                            "you can see.")

    class Meta:
        model = Limit
        fields = ["id", "key", "max_running", "max_starts_per_minute", "description", "owner", "group", "shared",
                  "running", "waiting", "jobs", "job_names", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"description": {"trim_whitespace": False}}

    @extend_schema_field(OpenApiTypes.INT)
    def get_running(self, limit):
        return limits.running_count(limit.key)

    @extend_schema_field(OpenApiTypes.INT)
    def get_waiting(self, limit):
        return limits.waiting(limit.key).count()

    @extend_schema_field(OpenApiTypes.INT)
    def get_jobs(self, limit):
        return Job.objects.filter(limit_key=limit.key).count()

    @extend_schema_field({"type": "array", "items": {"type": "string"}})
    def get_job_names(self, limit):
        request = self.context.get("request")
        return actions.named_by(limit.key, count=10, user=getattr(request, "user", None))

    def save(self, **kwargs):
        raise NotImplementedError("A limit is saved by jobs.actions.limits, which checks who may and writes the "
                                  "audit entry: pass it the validated data.")
