"""The operator's calls: backfill a past range of a job, every slot of a range accounted for, and
rerun the finished runs a selection names."""

from datetime import timedelta

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from rest_framework import serializers

from ..actions import jobs as actions
from ..models import TERMINAL_STATUSES, Job
from ..operations import slot_report
from ..schemas.jobs import field_errors
from .filters import with_tag

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


class RerunRequestSerializer(serializers.Serializer):
    job = serializers.IntegerField(required=False, min_value=1, help_text="The runs of this job (its id).")
    tag = serializers.CharField(required=False, max_length=100, help_text="The runs of the jobs carrying this tag.")
    status = serializers.ChoiceField(choices=sorted(TERMINAL_STATUSES), default="failed",
                                     help_text="The runs that ended so (default: failed).")
    since = serializers.DateTimeField(help_text="Created at or after (ISO 8601; naive means UTC).")
    until = serializers.DateTimeField(help_text="Created before (ISO 8601; naive means UTC).")
    dry_run = serializers.BooleanField(default=False, help_text="Only list the runs; rerun nothing.")

    def validate(self, data):
        if ("job" in data) == ("tag" in data):
            raise serializers.ValidationError({"job": ["Name a job or a tag (one of them)."]})
        if data["since"] >= data["until"]:
            raise serializers.ValidationError({"until": ["Must be after since."]})
        return data


class RerunResponseSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    runs = serializers.ListField(child=serializers.IntegerField(),
                                 help_text="Ids of the runs rerun (with dry_run: that would be).")
    started_meanwhile = serializers.ListField(child=serializers.IntegerField(),
                                              help_text="Ids of runs that matched but had started again meanwhile.")


def run_rerun_many(actor, visible, data):
    """(dry run?, the answer's body) of a bulk rerun asked for with ``data``, among ``visible`` runs."""
    request = RerunRequestSerializer(data=data)
    request.is_valid(raise_exception=True)
    values = request.validated_data
    runs = visible.filter(status=values["status"], created_at__gte=values["since"], created_at__lt=values["until"])
    if "job" in values:
        runs = runs.filter(job_id=values["job"])
    else:
        runs = runs.filter(job__in=with_tag(Job.objects.all(), values["tag"]))
    done, moved = actions.rerun_many(actor, runs, dry_run=values["dry_run"])
    return values["dry_run"], {"dry_run": values["dry_run"], "runs": [run.pk for run in done],
                               "started_meanwhile": [run.pk for run in moved]}


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
