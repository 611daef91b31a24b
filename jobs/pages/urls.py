from django.contrib.auth import views as auth_views
from django.urls import path

from . import calendars, forecast, job_forms, limits, login, operator_views, reports, tokens, views, windows

app_name = "pages"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/new/", job_forms.job_create, name="job-new"),
    path("jobs/schedule-preview/", job_forms.schedule_preview_view, name="schedule-preview"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/edit/", job_forms.job_edit, name="job-edit"),
    path("jobs/<int:pk>/clone/", job_forms.job_clone, name="job-clone"),
    path("jobs/<int:pk>/delete/", job_forms.job_delete, name="job-delete"),
    path("jobs/<int:pk>/run/", views.job_run_now, name="job-run"),
    path("jobs/<int:pk>/pause/", views.job_pause, name="job-pause"),
    path("jobs/<int:pk>/resume/", views.job_resume, name="job-resume"),
    path("jobs/<int:pk>/slots/", operator_views.job_slots, name="job-slots"),
    path("jobs/<int:pk>/report/", reports.job_report, name="job-report"),
    path("reports/", reports.tag_or_group_report, name="reports"),
    path("jobs/<int:pk>/backfill/", operator_views.job_backfill, name="job-backfill"),
    path("forecast/", forecast.forecast_page, name="forecast"),
    path("forecast/spread/", forecast.forecast_spread, name="forecast-spread"),
    path("calendars/", calendars.calendar_list, name="calendars"),
    path("calendars/<str:name>/", calendars.calendar_detail, name="calendar"),
    path("calendars/<str:name>/import/", calendars.calendar_import, name="calendar-import"),
    path("calendars/<str:name>/delete/", calendars.calendar_delete, name="calendar-delete"),
    path("runs/", views.run_list, name="runs"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/tail/", views.run_tail, name="run-tail"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("limits/", limits.limit_list, name="limits"),
    path("limits/new/", limits.limit_edit, name="limit-new"),
    path("limits/<slug:key>/edit/", limits.limit_edit, name="limit-edit"),
    path("limits/<slug:key>/delete/", limits.limit_delete, name="limit-delete"),
    path("windows/", windows.window_list, name="windows"),
    path("windows/new/", windows.window_edit, name="window-new"),
    path("windows/<str:name>/edit/", windows.window_edit, name="window-edit"),
    path("windows/<str:name>/delete/", windows.window_delete, name="window-delete"),
    path("accounts/tokens/", tokens.token_list, name="tokens"),
    path("accounts/tokens/new/", tokens.token_create, name="token-new"),
    path("accounts/tokens/<str:prefix>/revoke/", tokens.token_revoke, name="token-revoke"),
    path("accounts/login/", login.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="pages:login"), name="logout"),
]
