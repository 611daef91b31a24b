from django.urls import path

from . import forms, views

app_name = "workflow-pages"

urlpatterns = [
    path("workflows/", views.workflow_list, name="list"),
    path("workflows/new/", forms.workflow_new, name="new"),
    path("workflows/<int:pk>/", views.workflow_detail, name="detail"),
    path("workflows/<int:pk>/edit/", forms.workflow_edit, name="edit"),
    path("workflows/<int:pk>/versions/<int:number>/restore/", views.workflow_restore, name="version-restore"),
    path("workflows/<int:pk>/delete/", forms.workflow_delete, name="delete"),
    path("workflows/<int:pk>/run/", views.workflow_run_now, name="run"),
    path("workflow-runs/<int:pk>/rerun/", views.workflow_rerun, name="rerun"),
    path("workflow-runs/<int:pk>/cancel/", views.workflow_cancel, name="cancel"),
]
