"""GET /metrics: the Prometheus page, for a bearer token or, without one, for allowed addresses."""

import hmac

from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from . import metrics


@require_http_methods(["GET", "HEAD"])
def metrics_view(request):
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("A valid 'Authorization: Bearer <METRICS_TOKEN>' header is required.\n",
                                    status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not metrics.address_allowed(request.META.get("REMOTE_ADDR", ""), settings.METRICS_ALLOWED_IPS):
        return HttpResponse("Not an address in METRICS_ALLOWED_IPS.\n", status=403, content_type="text/plain")
    if connection.vendor != "postgresql":
        # The metrics are aggregates in PostgreSQL's SQL; SQLite is only the zero-setup trial default.
        return HttpResponse("Metrics need PostgreSQL: set DATABASE_URL to a postgres:// URL.\n", status=501,
                            content_type="text/plain")
    body, content_type = metrics.render()
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
