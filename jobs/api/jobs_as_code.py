"""Jobs as code through the API: apply a file's text (a plan, a dry run, or the change with
``prune``) and export the jobs as a file. The same reading, planning and applying as
``manage.py jobs apply`` (``jobs.as_code``).

Staff apply to every job. Other users need the ``jobs.add_job`` permission, and their file is
about the jobs they see (their own and their groups'): new jobs are theirs, a name taken by a job
they do not see is an error, ``prune`` deletes only among theirs, and each change is the user's
action (``jobs.actions``: command jobs need run_command_jobs, queues JOBS_QUEUES). Workflows and
channels in a file are for staff; a user's rules name their own jobs (``notifications.as_code``).
"""

import re

from django.conf import settings
from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import Source

from ..actions import jobs as actions
from ..actions.permissions import sees_everything
from ..as_code import files as as_code
from .params import choice_param
from .views import ApiViewSet

APPLY_PERMISSION = "jobs.add_job"
APPLY_DENIED = f"Applying jobs as code needs staff or the {APPLY_PERMISSION} permission."

# "line 12: jobs[2] (name: nightly): schedule.cron: '61 * * * *' is not ..." in its parts.
MESSAGE = re.compile(r"^(?:line (?P<line>\d+): )?(?P<entry>(?:jobs|calendars|workflows|channels|rules)\[\d+\])(?: \(name: (?P<name>.*?)\))?: "
                     r"(?P<message>.*)$", re.DOTALL)
# "line 8: the alias *a is not accepted: ..." (about the file, not one of its entries).
FILE_MESSAGE = re.compile(r"^line (?P<line>\d+): (?P<message>.*)$", re.DOTALL)
KEYS = {*as_code.file_fields(), *(f"schedule.{part}" for part in ("type", "cron", "timezone", "every_seconds",
                                                                   "run_at")), "nodes", "edges", "on_upstream_failure",
        "config", "channel", "events", "scope", "job", "dates", "country", "subdivision"}


class ApplyRequestSerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False, help_text="The file's text: YAML or JSON.")
    format = serializers.ChoiceField(choices=["yaml", "json"], default="yaml")
    dry_run = serializers.BooleanField(default=False, help_text="Check the plan and save nothing.")
    prune = serializers.BooleanField(default=False, help_text="Delete the jobs (yours, unless staff) that are "
                                                              "not in the file.")


class FieldChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    old = serializers.JSONField()
    new = serializers.JSONField()


class PlannedChangeSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["create", "update", "delete"])
    job = serializers.CharField()
    changes = FieldChangeSerializer(many=True)


class ApplyResponseSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    applied = serializers.BooleanField(help_text="Whether the database was changed.")
    changes = PlannedChangeSerializer(many=True)
    unchanged = serializers.IntegerField()
    plan = serializers.ListField(child=serializers.CharField(), help_text="The plan as `manage.py jobs apply` "
                                                                           "prints it, one line each.")


class FileErrorSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The whole message, as `manage.py jobs apply` prints it.")
    line = serializers.IntegerField(allow_null=True, help_text="The entry's first line in a YAML file.")
    entry = serializers.CharField(allow_null=True, help_text="jobs[N], workflows[N], channels[N] or rules[N], from 0.")
    job = serializers.CharField(allow_null=True, help_text="The entry's name.")
    key = serializers.CharField(allow_null=True, help_text="The key in error, such as schedule.cron.")
    message = serializers.CharField()


class FileErrorsSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = FileErrorSerializer(many=True)


class ExportSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["yaml", "json"])
    jobs = serializers.IntegerField(help_text="How many jobs the text holds.")
    text = serializers.CharField()


def error_parts(text):
    match = MESSAGE.match(text)
    if match is None:
        about_the_file = FILE_MESSAGE.match(text)
        line, message = (int(about_the_file["line"]), about_the_file["message"]) if about_the_file else (None, text)
        return {"text": text, "line": line, "entry": None, "job": None, "key": None, "message": message}
    message, key = match["message"], None
    head, sep, rest = message.partition(": ")
    if sep and head in KEYS:
        key, message = head, rest
    return {"text": text, "line": int(match["line"]) if match["line"] else None, "entry": match["entry"],
            "job": match["name"], "key": key, "message": message}


def file_errors(messages):
    return Response({"detail": "Nothing was applied: the file has errors.",
                     "errors": [error_parts(text) for text in messages]}, status=status.HTTP_400_BAD_REQUEST)


def planned(plan):
    """The jobs section's changes (``plan``: its JobPlan), secret values masked."""
    shown = as_code.shown_value
    out = [{"action": "create" if change.is_new else "update", "job": change.job.name,
            "changes": [{"key": key, "old": as_code.sorted_value(shown(key, old)),
                         "new": as_code.sorted_value(shown(key, new))}
                        for key, old, new in change.changed]} for change in plan.changes]
    return out + [{"action": "delete", "job": job.name, "changes": []} for job in plan.deletions]


class JobsAsCodeView(ApiViewSet, APIView):
    @property
    def max_body_bytes(self):
        return settings.JOBS_AS_CODE_MAX_BYTES

    @extend_schema(
        parameters=[OpenApiParameter("file_format", OpenApiTypes.STR, enum=["yaml", "json"],
                                     description="Default yaml. (`format` is the API's own: the answer's type.)")],
        responses=ExportSerializer,
        description="Every job you may apply to (all for staff; yours otherwise) as a jobs-as-code file, fields "
                    "at their default left out; staff get the workflows too.")
    def get(self, request):
        params = request.query_params
        fmt = choice_param(params, "file_format", ["yaml", "json"]) if "file_format" in params else "yaml"
        actor = self.file_actor(request)
        text = as_code.export_text(fmt, actor)
        return Response({"format": fmt, "jobs": as_code.jobs_of(actor).count(), "text": text})

    @extend_schema(
        request=ApplyRequestSerializer,
        responses={200: ApplyResponseSerializer, 400: FileErrorsSerializer, 403: OpenApiTypes.OBJECT},
        description="Make the jobs match a file, in one transaction: the plan (+ create, ~ update with the fields "
                    "that change, - delete with `prune`), then the change unless `dry_run` (which still checks "
                    "every job as it would be saved). An invalid file changes nothing and answers 400 with every "
                    "error: its entry, job name, key and (YAML) line. Staff apply to every job; other users need "
                    f"the {APPLY_PERMISSION} permission and their file is about the jobs they see. Applying the "
                    "same file twice changes nothing the second time.")
    def post(self, request):
        user = request.user
        if not (sees_everything(user) or user.has_perm(APPLY_PERMISSION)):
            raise PermissionDenied(APPLY_DENIED)
        values = ApplyRequestSerializer(data=request.data)
        values.is_valid(raise_exception=True)
        values = values.validated_data
        actor = self.file_actor(request)
        try:
            entries = as_code.read_entries(values["text"], values["format"])
            if "workflows" in entries and not sees_everything(user):
                return file_errors(["workflows: only staff may apply workflows through the API."])
            plan = as_code.plan_file(entries, actor, prune=values["prune"])
            jobs_plan = plan.sections.get("jobs")
            # Read before applying: saving gives the new jobs their ids.
            answer = {"dry_run": values["dry_run"], "applied": not values["dry_run"] and not plan.is_empty,
                      "changes": planned(jobs_plan) if jobs_plan else [],
                      "unchanged": jobs_plan.unchanged if jobs_plan else 0, "plan": plan.lines()}
            if not plan.is_empty:
                with transaction.atomic():
                    as_code.apply_plan(plan, actor, dry_run=values["dry_run"])
        except as_code.JobFileError as exc:
            return file_errors(exc.messages)
        return Response(answer)

    @staticmethod
    def file_actor(request):
        return actions.Actor.of_request(request, Source.API)
