from rest_framework.routers import SimpleRouter

from .views import WorkflowRunViewSet, WorkflowViewSet

app_name = "workflows-api"

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
router.register("workflow-runs", WorkflowRunViewSet, basename="workflow-run")

urlpatterns = router.urls
