"""The API's views: jobs (CRUD, run now, pause, resume) and runs (history, detail, cancel, rerun)."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models.fields.json import KeyTransform
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.reverse import reverse

from audit.models import Source

from .. import kinds, parameters
from ..actions import jobs as actions
from ..actions import versions as version_actions
from ..actions.permissions import visible_jobs, visible_runs
from ..models import Job, JobRun, RunStatus
from ..operations.reports import job_report
from ..schemas.jobs import JobSerializer, field_errors
from . import operator, reports
from .filters import with_tag
from .params import bool_param, choice_param, datetime_param, int_param, text_param
from .serializers import (
    JobDetailSerializer,
    RunDetailSerializer,
    RunRequestSerializer,
    RunSerializer,
    SnoozeRequestSerializer,
)
from .versions import VersionsViewSet

MAX_BODY_BYTES = 256 * 1024
# What a job's answer does not show of its last run (``LastRunSerializer``), each up to
# JOBS_OUTPUT_MAX_BYTES: not read.
LAST_RUN_UNSHOWN = ("last_run__output", "last_run__result", "last_run__error", "last_run__reason")


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self, limit):
        super().__init__(f"The request body is larger than {limit // 1024} KB.")


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class TooMany(APIException):
    """Over a quota of runs (``jobs.actions.quotas``) or a rate (test sends): the detail names it and its value."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many"


def api_error(exc):
    """An ``actions.ActionError`` as the API's answer: 400 per field, 403, 409 or 429 with its detail."""
    if exc.kind == actions.ActionError.FORBIDDEN:
        return PermissionDenied(exc.message)
    if exc.kind == actions.ActionError.CONFLICT:
        return Conflict(exc.message)
    if exc.kind == actions.ActionError.TOO_MANY:
        return TooMany(exc.message)
    return ValidationError(field_errors(DjangoValidationError(exc.fields)))


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


class ApiViewSet:
    """What every viewset of the API shares: a cap on the request body, the pagination, and the
    answers to a refused action."""

    pagination_class = Pagination
    max_body_bytes = MAX_BODY_BYTES

    @property
    def actor(self):
        return actions.Actor.of_request(self.request, Source.API)

    def handle_exception(self, exc):
        return super().handle_exception(api_error(exc) if isinstance(exc, actions.ActionError) else exc)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise ValidationError({"detail": "Content-Length is not a number."}) from None
        if length > self.max_body_bytes:
            raise RequestTooLarge(self.max_body_bytes)


PARAM_PREFIX = "param."


def param_filters(params):
    """{name: text} of the ``param.<name>=<text>`` filters of a query."""
    return {key.removeprefix(PARAM_PREFIX): text_param(params, key) for key in params if key.startswith(PARAM_PREFIX)}


def with_params(runs, user, params, wanted):
    """``runs`` given these values (``wanted``, {name: text}) of the parameters of the job that
    ``job=`` names, each typed by its declaration. Needs ``job``: the runs are then read through
    that job's index (run_job_recent_idx), never the whole table, and a name is checked against
    what the job declares before it reaches a query."""
    if "job" not in params:
        raise ValidationError({f"{PARAM_PREFIX}{next(iter(wanted))}"[:200]: [
            "Filtering on a parameter needs job=<id>: values are typed by that job's parameters."]})
    job = visible_jobs(user).filter(pk=int_param(params, "job")).only("parameters").first()
    if job is None:
        return runs.none()
    try:
        values = parameters.filter_values(job.parameters, wanted, field=PARAM_PREFIX.rstrip("."))
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from None
    # Each value through an alias of its key (params -> 'name'), never a lookup built from the name
    # (a parameter named "contains" is a key here, not a lookup).
    aliases = {f"param_{i}": KeyTransform(name, "params") for i, name in enumerate(values)}
    return runs.alias(**aliases).filter(**{alias: values[aliases[alias].key_name] for alias in aliases})


@extend_schema_view(
    list=extend_schema(
        description="Jobs you own, of your groups (all of them for staff), by name.",
        parameters=[
            OpenApiParameter("name", OpenApiTypes.STR, description="Exact name."),
            OpenApiParameter("enabled", OpenApiTypes.BOOL),
            OpenApiParameter("kind", OpenApiTypes.STR, enum=kinds.names()),
            OpenApiParameter("tag", OpenApiTypes.STR, description="Jobs carrying this tag."),
        ],
    ),
    create=extend_schema(description="Define a job; you become its owner. Command jobs need the "
                                     "jobs.run_command_jobs permission."),
    update=extend_schema(description="Replace a job's fields; without `schedule` the schedule is kept."),
    partial_update=extend_schema(description="Change some fields; with `schedule` it is applied again "
                                             "and `next_run_at` recomputed."),
)
class JobViewSet(VersionsViewSet, ApiViewSet, viewsets.ModelViewSet):
    history = version_actions.JOBS

    serializer_class = JobSerializer

    def get_serializer_class(self):
        return JobSerializer if self.action == "list" else JobDetailSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular reading the types
            return Job.objects.none()
        jobs = visible_jobs(self.request.user).select_related(
            "owner", "group__ping_key", "last_run", "crontab", "interval", "clocked").defer(*LAST_RUN_UNSHOWN)
        if self.action in ("update", "partial_update"):
            # Held until the edit commits: the scheduler skips a locked job (SKIP LOCKED) and run
            # now waits, so neither's write to next_run_at or last_run is overwritten by the edit.
            return jobs.select_for_update(of=("self",))
        if self.action != "list":
            return jobs
        params = self.request.query_params
        if "name" in params:
            jobs = jobs.filter(name=text_param(params, "name"))
        if "enabled" in params:
            jobs = jobs.filter(enabled=bool_param(params, "enabled"))
        if "kind" in params:
            jobs = jobs.filter(kind=choice_param(params, "kind", kinds.names()))
        if "tag" in params:
            jobs = with_tag(jobs, text_param(params, "tag"))
        return jobs

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):  # drf-spectacular reading the types has no user
            context["actor"] = self.actor
        return context

    def perform_create(self, serializer):
        values = dict(serializer.validated_data)
        schedule = values.pop("schedule", None) or {"type": "manual"}
        serializer.instance = actions.create(self.actor, Job(owner=self.request.user, **values), schedule)

    @transaction.atomic  # the row stays locked (get_queryset) until the edit and its entry commit
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        values = dict(serializer.validated_data)
        schedule = values.pop("schedule", None)
        serializer.instance = actions.edit(self.actor, serializer.instance, values, schedule)

    @extend_schema(responses={204: None, 409: OpenApiTypes.OBJECT},
                   description="Delete a job; 409 while a workflow uses it.")
    def destroy(self, request, *args, **kwargs):
        return super().destroy(request, *args, **kwargs)

    def perform_destroy(self, job):
        actions.delete(self.actor, job)

    @extend_schema(request=RunRequestSerializer, responses={202: RunDetailSerializer},
                   description="Run the job now (a manual run, queued at once), with `params`: values of the job's "
                               "parameters. A bad value is a 400 naming the parameter and the rule, and nothing "
                               "is queued. The `Location` header points at the new run.")
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        job = self.get_object()  # another user's job is a 404 before its body is read
        body = RunRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = actions.run_now(self.actor, job, body.validated_data.get("params"))
        data = RunDetailSerializer(run, context=self.get_serializer_context()).data
        location = reverse("api:run-detail", args=[run.pk], request=request)
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @extend_schema(request=None, responses=JobDetailSerializer,
                   description="Stop the job's schedule. Runs already queued still run; run now still works.")
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        return Response(self.get_serializer(actions.pause(self.actor, self.get_object())).data)

    @extend_schema(request=None, responses=JobDetailSerializer,
                   description="Restart the job's schedule from now on: slots that fell while it was "
                               "paused are not run.")
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        return Response(self.get_serializer(actions.resume(self.actor, self.get_object())).data)

    @extend_schema(request=SnoozeRequestSerializer, responses=JobDetailSerializer,
                   description="No notification of the job until `until` (in the future, at most 90 days ahead): its "
                               "runs go on, and what they would send is recorded on the run, not sent. Snoozing "
                               "again moves the end.")
    @action(detail=True, methods=["post"])
    def snooze(self, request, pk=None):
        job = self.get_object()
        body = SnoozeRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(self.get_serializer(actions.snooze(self.actor, job, body.validated_data["until"])).data)

    @extend_schema(request=None, responses=JobDetailSerializer, description="Notify about the job again from now on.")
    @action(detail=True, methods=["post"])
    def unsnooze(self, request, pk=None):
        return Response(self.get_serializer(actions.unsnooze(self.actor, self.get_object())).data)

    @extend_schema(request=operator.BackfillRequestSerializer,
                   responses={200: operator.BackfillResponseSerializer, 202: operator.BackfillResponseSerializer},
                   description="Create the runs of every slot of the job in the past range [start, end), at most "
                               "JOBS_BACKFILL_MAX_SLOTS. A slot that already has a run is left alone, so a backfill "
                               "is safe to repeat. With `dry_run` the slots are listed and nothing is created "
                               "(200); otherwise the runs are queued (202).")
    @action(detail=True, methods=["post"])
    def backfill(self, request, pk=None):
        dry_run, data = operator.run_backfill(self.actor, self.get_object(), request.data)
        return Response(data, status=status.HTTP_200_OK if dry_run else status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=None, responses=operator.SlotReportSerializer,
        parameters=[
            OpenApiParameter("start", OpenApiTypes.DATETIME, description="Default: 24 hours ago."),
            OpenApiParameter("end", OpenApiTypes.DATETIME, description="Default: now."),
        ],
        description="Every slot the job's schedule expected in [start, end) (at most JOBS_SLOT_REPORT_MAX_SLOTS) "
                    "and what became of it: ran (with its run), skipped (with the reason: overlap policy, "
                    "start deadline, catch-up policy, job paused or disabled), missing (no record at all: a "
                    "`missed` notification is raised by the periodic check, not by this call), due or upcoming.")
    @action(detail=True, methods=["get"])
    def slots(self, request, pk=None):
        return Response(operator.slots_of(self.get_object(), request.query_params))


    @extend_schema(request=None, responses=OpenApiTypes.OBJECT, parameters=[reports.DAYS],
                   description=reports.DESCRIPTION)
    @action(detail=True, methods=["get"], renderer_classes=reports.RENDERERS)
    def report(self, request, pk=None):
        job = self.get_object()
        report = reports.made(job_report, job, reports.days_of(request.query_params))
        return reports.respond(request, report, f"job-{job.pk}")

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT,
                   description="The targets a job may name, by kind, for the kinds whose target is chosen from a "
                               "list: `callable`, the registered functions; `task`, the Celery tasks of "
                               "`JOBS_CALLABLE_MODULES`.")
    @action(detail=False, methods=["get"])
    def targets(self, request):
        return Response(kinds.target_options())

    @extend_schema(
        request=None, responses=operator.WhySerializer,
        parameters=[OpenApiParameter("at", OpenApiTypes.DATETIME, required=True,
                                     description="The moment asked about (ISO 8601; naive means UTC).")],
        description="Why did (or didn't) the job run at a moment: one sentence about its slot at `at` (or the "
                    "first slot in the minute after it): it ran (which run), it was skipped (why), it has not "
                    "come yet, or it is missing (a `missed` notification is raised).")
    @action(detail=True, methods=["get"])
    def why(self, request, pk=None):
        job = self.get_object()
        if "at" not in request.query_params:
            raise ValidationError({"at": ["This parameter is required."]})
        return Response(operator.why(job, datetime_param(request.query_params, "at")))


RUN_ORDERINGS = [f"{sign}{field}" for field in ("created_at", "scheduled_for", "started_at", "finished_at")
                 for sign in ("-", "")]


@extend_schema_view(
    list=extend_schema(
        description="Run history of the jobs you can see, newest first. The list leaves out each run's "
                    "`output`, `result` and `attempts`: read them on the run itself.",
        parameters=[
            OpenApiParameter("job", OpenApiTypes.INT, description="A job's id."),
            OpenApiParameter("status", OpenApiTypes.STR, enum=RunStatus.values),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="Created at or after (ISO 8601)."),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="Created before (ISO 8601)."),
            OpenApiParameter("tag", OpenApiTypes.STR, description="Runs of jobs carrying this tag."),
            OpenApiParameter("ordering", OpenApiTypes.STR, enum=RUN_ORDERINGS,
                             description="Sort order; default -created_at (newest first)."),
            OpenApiParameter("param.<name>", OpenApiTypes.STR,
                             description="Runs given this value of the parameter <name> (repeatable, one per "
                                         "parameter; with `job`, whose declaration types the value)."),
        ],
    ),
    retrieve=extend_schema(description="One run, with its output, result, error, worker, timings and attempts."),
)
class RunViewSet(ApiViewSet, viewsets.ReadOnlyModelViewSet):
    def get_serializer_class(self):
        return RunSerializer if self.action == "list" else RunDetailSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return JobRun.objects.none()
        found = visible_runs(self.request.user).select_related("job")
        if self.action != "list":
            return found.prefetch_related("attempts")
        found = found.defer("output", "result")  # not in the list: not read
        params = self.request.query_params
        if "job" in params:
            found = found.filter(job_id=int_param(params, "job"))
        if wanted := param_filters(params):
            found = with_params(found, self.request.user, params, wanted)
        if "status" in params:
            found = found.filter(status=choice_param(params, "status", RunStatus.values))
        if "since" in params:
            found = found.filter(created_at__gte=datetime_param(params, "since"))
        if "until" in params:
            found = found.filter(created_at__lt=datetime_param(params, "until"))
        if "tag" in params:
            found = found.filter(job__in=with_tag(Job.objects.all(), text_param(params, "tag")))
        if "ordering" in params:
            ordering = choice_param(params, "ordering", RUN_ORDERINGS)
            found = found.order_by(ordering, "-id" if ordering.startswith("-") else "id")
        return found

    @extend_schema(
        request=None, responses=RunDetailSerializer,
        description="Cancel a queued, retrying or running run (a running attempt is stopped by its "
                    "worker). Idempotent: a run that has already finished, however it finished, is "
                    "answered with 200 and left unchanged. `detail` says which happened.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        cancelled = actions.cancel(self.actor, run)
        data = RunDetailSerializer(run, context=self.get_serializer_context()).data
        data["detail"] = "Cancelled." if cancelled else f"The run is already {run.status}; nothing changed."
        return Response(data)

    @extend_schema(
        request=None, responses={202: RunDetailSerializer},
        description="Run a finished run again as itself: it goes back to queued at its next attempt, with the same "
                    "slot and idempotency key; its earlier attempts are kept. Counted against the quota of runs "
                    "started per hour (429 naming it). 409 while the run is queued or running.",
    )
    @action(detail=True, methods=["post"])
    def rerun(self, request, pk=None):
        run = actions.rerun(self.actor, self.get_object())
        data = RunDetailSerializer(run, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="runs_rerun_many", request=operator.RerunRequestSerializer,
        responses={200: operator.RerunResponseSerializer, 202: operator.RerunResponseSerializer},
        description="Rerun the finished runs of a job or a tag that ended in `status` and were created in "
                    "[`since`, `until`): what `GET /api/runs/` lists with the same filters. At most "
                    "JOBS_RERUN_MAX_RUNS (a 400 beyond, nothing rerun); over a quota of runs a 429 naming it. "
                    "With `dry_run` the runs are listed and nothing is rerun (200); otherwise 202.",
    )
    @action(detail=False, methods=["post"], url_path="rerun")
    def rerun_many(self, request):
        dry_run, data = operator.run_rerun_many(self.actor, visible_runs(request.user), request.data)
        return Response(data, status=status.HTTP_200_OK if dry_run else status.HTTP_202_ACCEPTED)
