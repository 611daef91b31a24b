"""django-celery-beat's periodic tasks in the admin, with a permission on each action: as shipped,
anyone who may see the list may enable, disable or run every periodic task (run one: send any
registered task with its stored arguments). Here they need the change permission."""

from django.contrib import admin
from django_celery_beat import admin as beat
from django_celery_beat.models import PeriodicTask


class PeriodicTaskAdmin(beat.PeriodicTaskAdmin):
    @admin.action(description="Enable selected tasks", permissions=["change"])
    def enable_tasks(self, request, queryset):
        return super().enable_tasks(request, queryset)

    @admin.action(description="Disable selected tasks", permissions=["change"])
    def disable_tasks(self, request, queryset):
        return super().disable_tasks(request, queryset)

    @admin.action(description="Toggle activity of selected tasks", permissions=["change"])
    def toggle_tasks(self, request, queryset):
        return super().toggle_tasks(request, queryset)

    @admin.action(description="Run selected tasks", permissions=["change"])
    def run_tasks(self, request, queryset):
        return super().run_tasks(request, queryset)


if admin.site.is_registered(PeriodicTask):
    admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, PeriodicTaskAdmin)
