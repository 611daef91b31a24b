"""The operator's calls on a job: backfill a past range, and every slot of a range accounted for."""

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from rest_framework import serializers

from ..actions import jobs as actions
from ..operations import slot_report
from ..schemas.jobs import field_errors

DEFAULT_REPORT_RANGE = timedelta(hours=24)


class RangeSerializer(serializers.Serializer):
    start = serializers.DateTimeField(help_text="Start of the range (included), ISO 8601; naive means UTC.")
    end = serializers.DateTimeField(help_text="End of the range (excluded), ISO 8601; naive means UTC.")


class BackfillRequestSerializer(RangeSerializer):
    dry_run = serializers.BooleanField(default=False, help_text="Only list the slots; create nothing.")
    params = serializers.DictField(required=False, help_text="Values of the job's parameters every run gets; the "
                                                             "defaults fill the rest.")


class BackfillSlotSerializer(serializers.Serializer):
    scheduled_for = serializers.DateTimeField()
    run = serializers.IntegerField(allow_null=True, help_text="The run the slot already has, or null.")


class BackfillResponseSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    slots = BackfillSlotSerializer(many=True)
    to_create = serializers.IntegerField(help_text="Slots without a run (created unless a dry run).")
    created = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the runs created.")


class SlotRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    trigger = serializers.CharField()


class SlotSerializer(serializers.Serializer):
    scheduled_for = serializers.DateTimeField(source="at")
    outcome = serializers.ChoiceField(choices=[slot_report.RAN, slot_report.SKIPPED, slot_report.MISSING,
                                               slot_report.DUE, slot_report.UPCOMING])
    reason = serializers.CharField()
    run = SlotRunSerializer(allow_null=True)


class SlotReportSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    checked_from = serializers.DateTimeField(
        help_text="Slots before this (the job's creation or its last schedule change) are not checked.")
    counts = serializers.DictField(child=serializers.IntegerField())
    slots = SlotSerializer(many=True)


class WhySerializer(serializers.Serializer):
    job = serializers.CharField(help_text="The job's name.")
    at = serializers.DateTimeField()
    explanation = serializers.CharField(help_text="One sentence.")


def run_backfill(actor, job, data):
    """(dry run?, the answer's body) of a backfill asked for with ``data``."""
    request = BackfillRequestSerializer(data=data)
    request.is_valid(raise_exception=True)
    values = request.validated_data
    found = actions.backfill(actor, job, values["start"], values["end"], dry_run=values["dry_run"],
                             params=values.get("params"))
    return values["dry_run"], {
        "dry_run": values["dry_run"],
        "slots": [{"scheduled_for": slot, "run": found.existing.get(slot)} for slot in found.slots],
        "to_create": len(found.missing),
        "created": found.created,
    }


def slots_of(job, params):
    now = timezone.now()
    # An unescaped + of a UTC offset in a query string reads as a space.
    given = {name: params[name].strip().replace(" ", "+") for name in ("start", "end") if name in params}
    request = RangeSerializer(data={"start": now - DEFAULT_REPORT_RANGE, "end": now, **given})
    request.is_valid(raise_exception=True)
    try:
        report = slot_report.build(job, request.validated_data["start"], request.validated_data["end"], now=now)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(field_errors(exc)) from None
    outcomes = [slot_report.RAN, slot_report.SKIPPED, slot_report.MISSING, slot_report.DUE, slot_report.UPCOMING]
    return SlotReportSerializer({
        "start": report.start, "end": report.end, "checked_from": report.checked_from,
        "counts": {outcome: report.count(outcome) for outcome in outcomes},
        "slots": [{"at": slot.at, "outcome": slot.outcome, "reason": slot.reason,
                   "run": slot.run and {"id": slot.run.pk, "status": slot.run.status, "trigger": slot.run.trigger}}
                  for slot in report.slots],
    }).data


def why(job, moment):
    try:
        explanation = slot_report.explain(job, moment)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(field_errors(exc)) from None
    return WhySerializer({"job": job.name, "at": moment, "explanation": explanation}).data
