from django.urls import path

from . import channel_forms, rule_forms, views

app_name = "notification-pages"

urlpatterns = [
    path("channels/", views.channel_list, name="channels"),
    path("channels/new/", channel_forms.channel_new, name="channel-new"),
    path("channels/<int:pk>/edit/", channel_forms.channel_edit, name="channel-edit"),
    path("channels/<int:pk>/delete/", channel_forms.channel_delete, name="channel-delete"),
    path("channels/<int:pk>/test/", views.channel_test, name="channel-test"),
    path("rules/", rule_forms.rule_list, name="rules"),
    path("rules/new/", rule_forms.rule_new, name="rule-new"),
    path("rules/<int:pk>/edit/", rule_forms.rule_edit, name="rule-edit"),
    path("rules/<int:pk>/delete/", rule_forms.rule_delete, name="rule-delete"),
    path("jobs/<int:pk>/acknowledge/", views.job_acknowledge, name="job-acknowledge"),
    path("acknowledge/<str:token>/", views.acknowledge_link, name="acknowledge"),
]
