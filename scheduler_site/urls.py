from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from jobs.views_metrics import metrics_view

# Swagger UI's files come from drf-spectacular-sidecar and are served locally: no CDN.
urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[IsAuthenticated]),
         name="api-docs"),
    path("api/", include("jobs.api.urls")),
    path("api/", include("workflows.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("", include("jobs.pages.urls")),
    path("", include("workflows.pages.urls")),
]
