from django.urls import path
from rest_framework.routers import DefaultRouter

from ..resources import CALENDARS, LIMITS, QUOTAS, WINDOWS
from .calendars import CalendarViewSet
from .forecast import ForecastView, SpreadView
from .jobs_as_code import JobsAsCodeView
from .ping_keys import TeamPingKeyView
from .reports import TagOrGroupReport
from .resources import register
from .tokens import TokenDetail, TokenList
from .views import JobViewSet, RunViewSet

app_name = "api"

# The API's root view lists every app's calls: scheduler_site.api_root.
router = DefaultRouter()
router.include_root_view = False
router.register("jobs", JobViewSet, basename="job")
router.register("runs", RunViewSet, basename="run")
register(router, LIMITS)
register(router, CALENDARS, CalendarViewSet)
register(router, QUOTAS)
register(router, WINDOWS)

urlpatterns = [
    path("jobs-as-code/", JobsAsCodeView.as_view(), name="jobs-as-code"),
    path("reports/", TagOrGroupReport.as_view(), name="reports"),
    path("forecast/", ForecastView.as_view(), name="forecast"),
    path("forecast/spread/", SpreadView.as_view(), name="forecast-spread"),
    path("teams/<int:pk>/ping-key/", TeamPingKeyView.as_view(), name="team-ping-key"),
    path("tokens/", TokenList.as_view(), name="token-list"),
    path("tokens/<str:prefix>/", TokenDetail.as_view(), name="token-detail"),
    *router.urls,
]
