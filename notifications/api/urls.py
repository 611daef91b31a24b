from django.urls import path
from rest_framework.routers import SimpleRouter

from jobs.api.resources import register

from ..resources import CHANNELS, RULES
from .views import AcknowledgeView, ChannelViewSet, RuleViewSet

app_name = "notifications-api"

router = SimpleRouter()
register(router, CHANNELS, ChannelViewSet)
register(router, RULES, RuleViewSet)

urlpatterns = [*router.urls,
               path("jobs/<int:pk>/acknowledge/", AcknowledgeView.as_view(), name="job-acknowledge")]
