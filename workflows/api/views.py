"""The API's views for workflows (CRUD, run, pause, resume, versions) and workflow runs (history, detail
with steps, re-run from the failed steps, cancel)."""

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.reverse import reverse

from jobs.api.params import choice_param, int_param
from jobs.api.resources import ResourceViewSet
from jobs.api.versions import VersionsViewSet
from jobs.api.views import ApiViewSet

from .. import actions
from ..models import WorkflowRun, WorkflowRunStatus
from ..permissions import visible_workflow_runs
from ..resources import WORKFLOWS
from ..schemas import WorkflowRunDetailSerializer, WorkflowRunSerializer, WorkflowSerializer


def accepted(request, wf_run, context):
    data = WorkflowRunDetailSerializer(wf_run, context=context).data
    location = reverse("workflows-api:workflow-run-detail", args=[wf_run.pk], request=request)
    return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})


class WorkflowViewSet(VersionsViewSet, ResourceViewSet):
    resource = WORKFLOWS
    history = actions.HISTORY

    def get_queryset(self):
        found = super().get_queryset().select_related("owner", "group", "crontab", "interval", "clocked")
        if self.action in ("update", "partial_update"):
            return found.select_for_update(of=("self",))  # locked until the change and its entry commit
        if self.action != "list":
            return found
        latest = WorkflowRun.objects.order_by("-created_at", "-id")[:1]
        return found.prefetch_related("nodes__job", "edges", Prefetch("runs", queryset=latest, to_attr="latest_runs"))

    def perform_create(self, serializer):
        serializer.instance = actions.save_validated(self.actor, serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = actions.save_validated(self.actor, serializer.validated_data, serializer.instance)

    @extend_schema(request=None, responses={202: WorkflowRunDetailSerializer},
                   description="Start a run of the workflow now; its jobs without upstreams are queued at once. "
                               "The `Location` header points at the new workflow run.")
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        wf_run = actions.run_now(self.actor, self.get_object())
        return accepted(request, wf_run, self.get_serializer_context())

    @extend_schema(request=None, responses=WorkflowSerializer, description="Stop the workflow's schedule.")
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        return Response(self.get_serializer(actions.pause(self.actor, self.get_object())).data)

    @extend_schema(request=None, responses=WorkflowSerializer,
                   description="Restart the workflow's schedule from now on; missed slots are not run.")
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        return Response(self.get_serializer(actions.resume(self.actor, self.get_object())).data)


@extend_schema_view(
    list=extend_schema(
        description="Runs of the workflows you can see, newest first, without their steps.",
        parameters=[OpenApiParameter("workflow", OpenApiTypes.INT, description="A workflow's id."),
                    OpenApiParameter("status", OpenApiTypes.STR, enum=WorkflowRunStatus.values)],
    ),
    retrieve=extend_schema(description="One workflow run with each step: its job, status and run."),
)
class WorkflowRunViewSet(ApiViewSet, viewsets.ReadOnlyModelViewSet):
    def get_serializer_class(self):
        return WorkflowRunSerializer if self.action == "list" else WorkflowRunDetailSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return WorkflowRun.objects.none()
        found = visible_workflow_runs(self.request.user).select_related("workflow")
        if self.action != "list":
            return found.prefetch_related("steps__job", "steps__run")
        params = self.request.query_params
        if "workflow" in params:
            found = found.filter(workflow_id=int_param(params, "workflow"))
        if "status" in params:
            found = found.filter(status=choice_param(params, "status", WorkflowRunStatus.values))
        return found

    @extend_schema(request=None, responses={202: WorkflowRunDetailSerializer, 409: OpenApiTypes.OBJECT},
                   description="Re-run a failed or cancelled workflow run: a new workflow run keeps the steps "
                               "that succeeded and runs the failed ones and everything downstream of them. "
                               "409 when the run is not failed or cancelled, or was already re-run.")
    @action(detail=True, methods=["post"])
    def rerun(self, request, pk=None):
        new_run = actions.rerun(self.actor, self.get_object())
        return accepted(request, new_run, self.get_serializer_context())

    @extend_schema(request=None, responses=WorkflowRunDetailSerializer,
                   description="Cancel a running workflow run: its active step runs are cancelled and no further "
                               "step starts. Idempotent: a finished workflow run is left as it is.")
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        wf_run = self.get_object()
        cancelled = actions.cancel(self.actor, wf_run)
        data = WorkflowRunDetailSerializer(wf_run, context=self.get_serializer_context()).data
        data["detail"] = "Cancelled." if cancelled else f"The workflow run is already {wf_run.status}; nothing changed."
        return Response(data)
