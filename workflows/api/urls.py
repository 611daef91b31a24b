from rest_framework.routers import SimpleRouter

from jobs.api.resources import register

from ..resources import WORKFLOWS
from .views import WorkflowRunViewSet, WorkflowViewSet

app_name = "workflows-api"

router = SimpleRouter()
register(router, WORKFLOWS, WorkflowViewSet)
router.register("workflow-runs", WorkflowRunViewSet, basename="workflow-run")

urlpatterns = router.urls
