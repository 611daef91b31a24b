from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.conf import settings

        from . import registry, signals  # noqa: F401  (connects the Celery signal handlers)

        registry.load_modules(settings.JOBS_CALLABLE_MODULES)
