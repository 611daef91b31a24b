"""The one schema of a job, for the API and for jobs-as-code files (``JobSerializer``): one shape and
one set of messages.

The serializer checks the shape of a job; the model checks the rest when the action saves it
(``Job.full_clean`` through ``definitions.save_job``), and Django's per-field errors become the
API's per-field 400s and a file's error lines (``field_errors``). The context carries the ``actor``
(``jobs.actions``)."""

from datetime import UTC

from django.contrib.auth.models import Group
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from .. import parameters
from ..access import secrets
from ..actions.permissions import queue_refusal
from ..definitions import fields as job_fields
from ..definitions import jobs as definitions
from ..models import DstRepeated, DstSkipped, Job, JobRun
from ..timing import schedules, spread
from .owned import GroupField

# Keys of ``parse_schedule``'s errors that describe a part of the schedule object.
SCHEDULE_KEYS = {"schedule", "type", "cron", "timezone", "every_seconds", "run_at"}

MAX_INTERVAL_SECONDS = 2**31 - 1  # IntervalSchedule.every is a 32-bit integer

SCHEDULE_SCHEMA = {
    "type": "object",
    "description": (
        'One of {"type": "cron", "cron": "*/5 * * * *", "timezone": "Europe/Berlin"}, '
        '{"type": "interval", "every_seconds": 60}, {"type": "once", "run_at": "<ISO 8601>"} '
        'or {"type": "manual"}. Omitted on create: manual. Omitted on update: unchanged.'
    ),
    "properties": {
        "type": {"type": "string", "enum": ["cron", "interval", "once", "manual"]},
        "cron": {"type": "string", "example": "*/5 * * * *",
                 "description": "Five fields; H where a number goes (H, H(0-29), H/15) is a number chosen from "
                                "a hash of the job's name."},
        "resolved": {"type": "string", "readOnly": True, "example": "37 * * * *",
                     "description": "A cron expression with H as this job runs it (ignored on input)."},
        "timezone": {"type": "string", "example": "Europe/Berlin"},
        "every_seconds": {"type": "integer", "minimum": 1},
        "run_at": {"type": "string", "format": "date-time"},
    },
    "required": ["type"],
}


def field_errors(exc):
    """A Django ValidationError as DRF's {field: [messages]}, schedule parts nested under
    ``schedule``."""
    if not hasattr(exc, "error_dict"):
        return {api_settings.NON_FIELD_ERRORS_KEY: exc.messages}
    errors, schedule = {}, {}
    for name, messages in exc.message_dict.items():
        if name == NON_FIELD_ERRORS:
            errors[api_settings.NON_FIELD_ERRORS_KEY] = messages
        elif name.startswith("params."):  # a run's value of one parameter (jobs.parameters.resolve)
            errors.setdefault("params", {})[name.removeprefix("params.")] = messages
        elif name in SCHEDULE_KEYS:
            schedule[name] = messages
        else:
            errors[name] = messages
    if schedule:
        errors["schedule"] = schedule.get("schedule") if set(schedule) == {"schedule"} else schedule
    return errors

@extend_schema_field(SCHEDULE_SCHEMA)
class ScheduleField(serializers.Field):
    """The job's schedule as one object, read with ``schedule_of`` and checked with
    ``parse_schedule``; it is applied to the job when the job is saved."""

    def __init__(self, **kwargs):
        super().__init__(source="*", required=False, **kwargs)

    def to_representation(self, job):
        shown = definitions.schedule_of(job)
        if shown["type"] == "cron" and shown["cron"] != job.cron_expression:
            shown["resolved"] = job.cron_expression  # H: the numbers this job's name chose (read-only)
        return shown

    def to_internal_value(self, data):
        if isinstance(data, dict) and "resolved" in data:  # what was read back; the expression is "cron"
            data = {key: value for key, value in data.items() if key != "resolved"}
        if isinstance(data, dict) and not isinstance(data.get("timezone", ""), str):
            raise serializers.ValidationError({"timezone": ["Must be a string such as Europe/Berlin."]})
        try:
            spec = definitions.parse_schedule(data)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(field_errors(exc)["schedule"]) from None
        # Inputs parse_schedule lets through that would fail when saved (a 500): a timezone that
        # is not a string (above), an interval too long for IntervalSchedule.every, a moment that
        # is out of range in UTC, and a cron expression no date matches (0 0 31 2 *).
        if spec["type"] == "once":
            try:
                spec["run_at"].astimezone(UTC)
            except OverflowError:
                raise serializers.ValidationError({"run_at": ["Out of range."]}) from None
        if spec["type"] == "interval" and spec["every_seconds"] > MAX_INTERVAL_SECONDS:
            raise serializers.ValidationError({"every_seconds": [f"At most {MAX_INTERVAL_SECONDS} seconds."]})
        if spec["type"] == "cron" and not schedules.matches_a_date(spread.resolve(spec["cron"], ""), spec["timezone"]):
            raise serializers.ValidationError({"cron": ["This expression matches no date."]})
        return {"schedule": spec}


@extend_schema_field({
    "type": "object", "additionalProperties": {"type": "string"},
    "description": f"Names to secret values. Write-only: read back as \"{secrets.MASK}\"; sending "
                   f"\"{secrets.MASK}\" keeps the stored value, leaving a name out removes it.",
})
class SecretsField(serializers.Field):
    """A secret field: its values are stored encrypted and never read back (``jobs.access.secrets``)."""

    def to_representation(self, stored):
        return secrets.masked(stored)

    def to_internal_value(self, data):
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise serializers.ValidationError("Must be a JSON object of names to string values.")
        return data


PARAMETERS_SCHEMA = {
    "type": "array",
    "description": "Run-time parameters: the values a run is given (POST /api/jobs/<id>/run/ with {\"params\": {...}}) "
                   "are checked against them; scheduled runs take the defaults.",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "An identifier: letters, digits and _."},
            "type": {"type": "string", "enum": ["string", "integer", "number", "boolean", "date", "datetime", "choice"]},
            "default": {"description": "A value of the type, or null for none."},
            "required": {"type": "boolean", "default": False},
            "description": {"type": "string"},
            "choices": {"type": "array", "items": {"type": "string"}, "description": "For the choice type only."},
        },
        "required": ["name", "type"],
    },
}


@extend_schema_field(PARAMETERS_SCHEMA)
class ParametersField(serializers.JSONField):
    """The job's parameter declaration (checked by the model, ``jobs.parameters``)."""

class LastRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobRun
        fields = ["id", "status", "scheduled_for", "finished_at"]


class JobSerializer(serializers.ModelSerializer):
    schedule = ScheduleField()
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True)
    group = GroupField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True,
        help_text="A group of yours whose members may also see and run the job.",
    )
    last_run = LastRunSerializer(read_only=True, allow_null=True)
    ping_url = serializers.CharField(
        read_only=True, allow_null=True,
        help_text="Check-in jobs: where the job's runs are reported (SITE_URL/ping/<uuid>); null for other kinds.")
    ping_url_slug = serializers.CharField(
        read_only=True, allow_null=True,
        help_text="Check-in jobs of a team with a ping key: the same by name (SITE_URL/ping/<team ping key>/<name>).")
    secret_environment = SecretsField(required=False)
    secret_http_headers = SecretsField(required=False)
    parameters = ParametersField(required=False)

    class Meta:
        model = Job
        # The job's fields as jobs.definitions.fields declares them, with what the service sets itself.
        fields = ["id", *job_fields.EDITABLE, "ping_url", "ping_url_slug", "next_run_at", "last_run", "consecutive_failures",
                  "paused_reason", "snoozed_until", "created_at", "updated_at"]
        read_only_fields = ["next_run_at", "consecutive_failures", "paused_reason", "snoozed_until", "created_at",
                            "updated_at"]
        # Kept as given: a request body is sent byte for byte, and a text of several lines keeps
        # its indentation (and a file applied twice compares equal).
        extra_kwargs = {"description": {"trim_whitespace": False}, "http_body": {"trim_whitespace": False},
                        **{name: {"error_messages": {"invalid_choice": f"Must be one of {', '.join(choices.values)}."}}
                           for name, choices in (("dst_skipped", DstSkipped), ("dst_repeated", DstRepeated))}}

    def validate(self, attrs):
        nul = [name for name in ("tags", "calendars", "args", "kwargs", "environment", "http_headers",
                                 "http_ok_statuses", "secret_environment", "secret_http_headers", "parameters")
               if definitions.contains_nul(attrs.get(name))]
        if nul:
            raise serializers.ValidationError({name: ["Must not contain NUL (\\u0000) characters."] for name in nul})
        # Sealed here, where the stored values are known: the mask keeps a stored value (jobs.access.secrets).
        for name in secrets.FIELDS:
            if name in attrs:
                stored = getattr(self.instance, name, None) if self.instance is not None else None
                try:
                    attrs[name] = secrets.seal(attrs[name], stored, name)
                except DjangoValidationError as exc:
                    raise serializers.ValidationError(field_errors(exc)) from None
        return attrs

    def validate_queue(self, queue):
        if self.instance is not None and queue == self.instance.queue:
            return queue  # kept as it is: not a new choice of this user's
        if problem := queue_refusal(self.context["actor"].user, queue):
            raise serializers.ValidationError(problem)
        return queue

    def validate_args(self, value):
        if not isinstance(value, list):
            raise serializers.ValidationError("Must be a JSON list.")
        return value

    def validate_kwargs(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value

    def validate_parameters(self, value):
        """Normalised here (a file applied twice then compares equal); the model checks it again with
        the job's secret names."""
        try:
            return parameters.checked_declaration(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["parameters"]) from None

    def validate_tags(self, value):
        if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
            raise serializers.ValidationError("Must be a JSON list of strings.")
        return value

    validate_environment = validate_kwargs  # a JSON object too

    def validate_group(self, group):
        actor = self.context["actor"]  # a jobs.actions.jobs.Actor
        if group is not None and not actor.sees_everything and not actor.user.groups.filter(pk=group.pk).exists():
            raise serializers.ValidationError(f"You are not a member of the group '{group.name}'.")
        return group

    def save(self, **kwargs):
        raise NotImplementedError("A job is saved by jobs.actions.jobs.create or edit, which check the command-job "
                                  "permission and write the audit entry: pass them the validated data.")
