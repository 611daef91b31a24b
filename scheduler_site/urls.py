from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from jobs.api.pings import ping
from jobs.metrics.views import metrics_view

from .api_root import ApiRoot
from .audit_api import AuditViewSet

_swagger = SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[IsAuthenticated])


def api_docs(request, *args, **kwargs):
    """A page for people: a browser with no session (and no token) gets the login page, then comes
    back here, rather than a bare 401."""
    if not request.user.is_authenticated and "HTTP_AUTHORIZATION" not in request.META:
        return redirect_to_login(request.get_full_path())
    return _swagger(request, *args, **kwargs)


# Swagger UI's files come from drf-spectacular-sidecar and are served locally: no CDN. A Django project
# of its own adds service_urls beside its admin (docs/how-to/existing-django-project.md).
service_urls = [
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/", ApiRoot.as_view(), name="api-root"),
    path("api/audit/", AuditViewSet.as_view({"get": "list"}), name="audit-list"),
    path("api/", include("jobs.api.urls")),
    path("api/", include("workflows.api.urls")),
    path("api/", include("notifications.api.urls")),
    path("oidc/", include("sso.urls")),
    path("metrics", metrics_view, name="metrics"),
    # Check-in jobs' pings: no login, the uuid (or the team's ping key) is the secret (docs/guide/checkins.md).
    path("ping/<uuid:key>", ping, name="ping"),
    path("ping/<uuid:key>/", ping),
    path("ping/<uuid:key>/<str:action>", ping, name="ping-action"),
    # The slug form: the team's ping key and the job's name (never shaped like a uuid, so tried after).
    path("ping/<str:key>/<str:slug>", ping, name="ping-slug"),
    path("ping/<str:key>/<str:slug>/", ping),
    path("ping/<str:key>/<str:slug>/<str:action>", ping, name="ping-slug-action"),
    path("favicon.ico", RedirectView.as_view(url=static("pages/favicon.svg"), permanent=True), name="favicon"),
    path("", include("jobs.pages.urls")),
    path("", include("workflows.pages.urls")),
    path("", include("notifications.pages.urls")),
]

urlpatterns = [path("admin/", admin.site.urls), *service_urls]
