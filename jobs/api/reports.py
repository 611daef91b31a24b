"""On-time reports in the API: a job's (``GET /api/jobs/<id>/report/``, an action of the jobs' views)
and a tag's or a group's (``GET /api/reports/``), as JSON or, with ``?format=csv`` or
``Accept: text/csv``, as a CSV file of the days."""

import json

from django.contrib.auth.models import Group
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..actions.permissions import visible_jobs
from ..operations import reports
from .filters import with_tag

DAYS = OpenApiParameter("days", OpenApiTypes.INT, description=f"The window: the last N days, 1 to {reports.MAX_DAYS} "
                        "(default 30), each a day of the job's zone.")
DESCRIPTION = (
    "On-time report over the last `days` days: slots the schedule expected (while the job was enabled, "
    "from when its schedule was last set), slots with a run, runs started within the start deadline "
    "(JOBS_MISFIRE_GRACE_SECONDS when the job sets none), runs finished within the SLA (succeeded, when "
    "no SLA is set), slots missed (no run) and skipped (by reason), p50/p95 duration with the trend "
    "against the days before, and each day's figures. `?format=csv` (or `Accept: text/csv`) gives the days "
    "as CSV.")


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        # A report arrives as its CSV text (respond); anything else (an error) as its JSON.
        return data if isinstance(data, str) else json.dumps(data)


RENDERERS = [JSONRenderer, BrowsableAPIRenderer, CsvRenderer]


def days_of(params):
    try:
        return reports.window_days(params.get("days", 30))
    except ValueError as exc:
        raise ValidationError({"days": [str(exc)]}) from None


def made(build, *args):
    """The report ``build(*args)`` makes; a 400 on ``days`` for one past JOBS_REPORT_MAX_SLOTS."""
    try:
        return build(*args)
    except reports.ReportTooLarge as exc:
        raise ValidationError({"days": [str(exc)]}) from None


def respond(request, report, name):
    if getattr(request, "accepted_renderer", None) is not None and request.accepted_renderer.format == "csv":
        return Response(reports.as_csv(report), headers={
            "Content-Disposition": f'attachment; filename="{name}-{report["days"]}d.csv"'})
    return Response(report)


class TagOrGroupReport(APIView):
    renderer_classes = RENDERERS

    @extend_schema(
        request=None, responses=OpenApiTypes.OBJECT,
        parameters=[DAYS, OpenApiParameter("tag", OpenApiTypes.STR, description="The jobs carrying this tag."),
                    OpenApiParameter("group", OpenApiTypes.STR, description="The jobs of this group (its name).")],
        description=DESCRIPTION.replace("On-time report", "The on-time report of the jobs you can see that carry "
                                        "`tag` or belong to `group` (exactly one of them), added together,"))
    def get(self, request):
        params = request.query_params
        if ("tag" in params) == ("group" in params):
            raise ValidationError({"tag": ["Give exactly one of tag and group."]})
        days = days_of(params)
        jobs = visible_jobs(request.user).select_related("crontab", "interval", "clocked")
        if "tag" in params:
            tag = params["tag"]
            if not tag or len(tag) > 100 or "\x00" in tag:
                raise ValidationError({"tag": ["A tag is 1 to 100 characters."]})
            chosen, name = list(with_tag(jobs, tag)[:reports.MAX_JOBS + 1]), f"tag-{tag}"
        else:
            group = Group.objects.filter(name=params["group"][:150]).first()
            if group is None:
                raise NotFound("No such group.")
            chosen, name = list(jobs.filter(group=group)[:reports.MAX_JOBS + 1]), f"group-{group.pk}"
        if len(chosen) > reports.MAX_JOBS:
            raise ValidationError({"tag" if "tag" in params else "group": [
                f"More than {reports.MAX_JOBS} jobs: a report adds up at most {reports.MAX_JOBS}."]})
        report = made(reports.jobs_report, chosen, days) | {
            "tag" if "tag" in params else "group": params.get("tag") or params.get("group"),
            "jobs": [job.pk for job in chosen]}
        return respond(request, report, name)
