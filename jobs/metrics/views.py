"""GET /metrics: the Prometheus page, for a bearer token (METRICS_TOKEN) or, without one, for the
addresses of METRICS_ALLOWED_IPS (none by default); the client's address is read through
TRUSTED_PROXIES, so a proxy on the same host does not make every caller 127.0.0.1."""

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_http_methods

from audit.trail import client_address

from . import collector


def refusal(request):
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return None
    if not given and collector.address_allowed(client_address(request), settings.METRICS_ALLOWED_IPS):
        return None
    text = ("A valid 'Authorization: Bearer <METRICS_TOKEN>' header is required.\n" if token else
            "Metrics need METRICS_TOKEN set on the server (or the scraper's address in METRICS_ALLOWED_IPS).\n")
    response = HttpResponse(text, status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@require_http_methods(["GET", "HEAD"])
def metrics_view(request):
    if (refused := refusal(request)) is not None:
        return refused
    body, content_type = collector.render()
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
