from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.conf import settings
        from django.core import checks
        from django.db.models.signals import post_migrate

        from . import as_code
        from .actions.permissions import ensure_command_runners_group
        from .kinds.callable import registry
        from .management import squashed_migrations
        from .worker import signals  # noqa: F401  (connects the Celery signal handlers)

        registry.load_modules(settings.JOBS_CALLABLE_MODULES)
        # ``limits:``, ``calendars:`` and ``windows:`` in a jobs file, saved before the jobs that name them; each module
        # registers its section (jobs.as_code.resources) when the files first need it.
        as_code.SECTION_MODULES += ["jobs.as_code.limits", "jobs.as_code.calendars", "jobs.as_code.windows"]
        if settings.JOBS_TRACING:
            from .telemetry import tracing

            tracing.start(service_name=process_role())
        post_migrate.connect(ensure_command_runners_group, sender=self)
        checks.register(squashed_migrations.partly_applied, checks.Tags.database)


def process_role():
    """The name this process's traces go under unless OTEL_SERVICE_NAME names one."""
    import sys

    for role in ("worker", "beat", "flower"):
        if role in sys.argv[1:]:
            return f"scheduler-{role}"
    return "scheduler-web" if any("gunicorn" in arg or "runserver" in arg for arg in sys.argv) else "scheduler"
