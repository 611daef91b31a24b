from rest_framework.routers import DefaultRouter

from .views import JobViewSet, RunViewSet

app_name = "api"

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("runs", RunViewSet, basename="run")

urlpatterns = router.urls
