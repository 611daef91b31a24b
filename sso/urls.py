from django.urls import path

from . import views

app_name = "sso"

urlpatterns = [
    path("authenticate/", views.Authenticate.as_view(), name="authenticate"),
    path("callback/", views.Callback.as_view(), name="callback"),
]
