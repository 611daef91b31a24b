from django.urls import path

from . import views

app_name = "notification-pages"

urlpatterns = [
    path("channels/", views.channel_list, name="channels"),
    path("channels/<int:pk>/test/", views.channel_test, name="channel-test"),
    path("jobs/<int:pk>/acknowledge/", views.job_acknowledge, name="job-acknowledge"),
    path("acknowledge/<str:token>/", views.acknowledge_link, name="acknowledge"),
]
