from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated

from jobs.views_metrics import metrics_view

# No Swagger or Redoc page: drf-spectacular loads them from a CDN. The browsable API (/api/) and
# the OpenAPI document (/api/schema/) work offline.
urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path("api/", include("jobs.api.urls")),
    path("metrics", metrics_view, name="metrics"),
]
