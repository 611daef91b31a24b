from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.conf import settings
        from django.db.models.signals import post_migrate

        from .actions.permissions import ensure_command_runners_group
        from .as_code import limits  # noqa: F401  (registers the files' limits: section)
        from .kinds.callable import registry
        from .worker import signals  # noqa: F401  (connects the Celery signal handlers)

        registry.load_modules(settings.JOBS_CALLABLE_MODULES)
        post_migrate.connect(ensure_command_runners_group, sender=self)
