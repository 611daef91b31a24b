"""JSON shapes of what only the API answers: a job with its DST preview, a run, its attempts, and a
request to run a job now. A job's own schema, which jobs files share, is ``jobs.schemas.jobs``."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from ..definitions import jobs as definitions
from ..lifecycle import limits
from ..models import JobAttempt, JobRun
from ..schemas.jobs import JobSerializer


class SnoozeRequestSerializer(serializers.Serializer):
    until = serializers.DateTimeField(help_text="When the job's notifications start again: in the future, at most 90 "
                                                "days ahead (a time without an offset is in TIME_ZONE).")


class RunRequestSerializer(serializers.Serializer):
    params = serializers.DictField(
        required=False, help_text="Values of the job's parameters by name; the defaults fill the rest. A bad value "
                                  "is a 400 naming the parameter and the rule, and nothing is queued.")

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [
                'The body must be a JSON object, such as {"params": {"day": "2026-11-01"}}.']})
        # A misspelt key would otherwise run the job with its defaults.
        if unknown := sorted(set(data) - set(self.fields)):
            raise serializers.ValidationError({key: ["Unknown key: the body takes params only."] for key in unknown})
        return super().to_internal_value(data)

DST_PREVIEW_SCHEMA = {
    "type": "object", "nullable": True,
    "description": "A cron job's next two clock changes in its zone (none for UTC or a zone without DST) and what "
                   "its DST policy (`dst_skipped`, `dst_repeated`) does to each slot they skip or repeat; null for "
                   "other schedules.",
    "properties": {
        "timezone": {"type": "string"}, "dst_skipped": {"type": "string"}, "dst_repeated": {"type": "string"},
        "transitions": {"type": "array", "items": {"type": "object", "properties": {
            "kind": {"type": "string", "description": "skipped (clocks jump forward) or repeated (they fall back)"},
            "at": {"type": "string", "format": "date-time"},
            "local_before": {"type": "string", "description": "The wall-clock time just before the change."},
            "local_after": {"type": "string", "description": "The wall-clock time the clocks are set to."},
            "offset_before": {"type": "string"}, "offset_after": {"type": "string"},
            "description": {"type": "string"},
            "slots": {"type": "array", "items": {"type": "object", "properties": {
                "wall": {"type": "string"},
                "outcome": {"type": "string", "description": "shifted, skipped, first, second or both"},
                "runs_at": {"type": "array", "items": {"type": "string", "format": "date-time"}},
                "text": {"type": "string"},
            }}},
            "more_slots": {"type": "boolean"},
        }}},
    },
}


class JobDetailSerializer(JobSerializer):
    """One job, with what only its own views show (each costs a little: never in a list)."""

    dst_preview = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "dst_preview"]

    @extend_schema_field(DST_PREVIEW_SCHEMA)
    def get_dst_preview(self, job):
        return definitions.dst_preview(job)


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobAttempt
        # task_id: the attempt's message, "run-<run>-<attempt>", or a bundle's "bundle-..." (docs/guide/bundles.md)
        fields = ["number", "outcome", "worker", "pid", "task_id", "started_at", "finished_at", "heartbeat_at",
                  "error", "traceback"]


class RunSerializer(serializers.ModelSerializer):
    """A run in the history list: everything but its output and result, each up to
    JOBS_OUTPUT_MAX_BYTES (the run itself carries them, ``RunDetailSerializer``); its error is
    at most JOBS_ERROR_MAX_BYTES."""

    job_name = serializers.CharField(source="job.name", read_only=True)
    duration_seconds = serializers.SerializerMethodField()
    waiting_for = serializers.SerializerMethodField()
    idempotency_key = serializers.CharField(
        read_only=True, help_text="What job code gets to make its side effects safe: \"<job id>:<slot in UTC>\", the "
                                  "same on every attempt and every re-run of the run (the attempt is `attempt`).")

    class Meta:
        model = JobRun
        fields = [
            "id", "job", "job_name", "status", "trigger", "attempt", "max_attempts", "scheduled_for",
            "created_at", "queued_at", "started_at", "finished_at", "duration_seconds", "worker",
            "output_bytes", "error", "reason", "idempotency_key", "params", "waiting_for", "waiting_since",
            "waited_seconds", "job_version",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "string", "nullable": True,
                          "description": "Why a queued run waits under its job's limit, such as \"waiting for "
                                         "warehouse (3 of 3 running)\"; null when it does not wait."})
    def get_waiting_for(self, run):
        return limits.waiting_for(run, timezone.now())

    @extend_schema_field(OpenApiTypes.FLOAT)
    def get_duration_seconds(self, run):
        duration = run.duration
        return duration.total_seconds() if duration is not None else None


class RunDetailSerializer(RunSerializer):
    """One run with its result, its output (the kept tail, ``output_bytes`` is what was written) and
    attempts."""

    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "result", "output", "attempts"]
        read_only_fields = fields
