from django.urls import path

from . import channel_forms, views

app_name = "notification-pages"

urlpatterns = [
    path("channels/", views.channel_list, name="channels"),
    path("channels/new/", channel_forms.channel_new, name="channel-new"),
    path("channels/<int:pk>/edit/", channel_forms.channel_edit, name="channel-edit"),
    path("channels/<int:pk>/delete/", channel_forms.channel_delete, name="channel-delete"),
    path("channels/<int:pk>/test/", views.channel_test, name="channel-test"),
]
