from django.urls import path

from . import views

app_name = "workflow-pages"

urlpatterns = [
    path("workflows/", views.workflow_list, name="list"),
    path("workflows/<int:pk>/", views.workflow_detail, name="detail"),
    path("workflows/<int:pk>/run/", views.workflow_run_now, name="run"),
    path("workflow-runs/<int:pk>/rerun/", views.workflow_rerun, name="rerun"),
    path("workflow-runs/<int:pk>/cancel/", views.workflow_cancel, name="cancel"),
]
