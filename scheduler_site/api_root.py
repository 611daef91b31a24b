"""The API's root (``GET /api/``): a link to every app's calls, for people and the browsable API."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

ROUTES = {
    "jobs": "api:job-list",
    "runs": "api:run-list",
    "jobs-as-code": "api:jobs-as-code",
    "tokens": "api:token-list",
    "calendars": "api:calendar-list",
    "forecast": "api:forecast",
    "limits": "api:limit-list",
    "quotas": "api:quota-list",
    "workflows": "workflows-api:workflow-list",
    "workflow-runs": "workflows-api:workflow-run-list",
    "channels": "notifications-api:channel-list",
    "rules": "notifications-api:rule-list",
    "audit": "audit-list",
    "schema": "api-schema",
}


class ApiRoot(APIView):
    """The job scheduler's API: jobs, runs, jobs as code, workflows, notification channels and rules,
    and the audit trail."""

    @extend_schema(exclude=True)
    def get(self, request, format=None):
        return Response({name: reverse(view, request=request, format=format) for name, view in ROUTES.items()})
