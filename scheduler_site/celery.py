import os

from celery import Celery
from celery.app import trace
from celery.signals import beat_init, setup_logging, worker_init

from . import kombu_patches, process, remote_control

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
# Celery runs Django's system checks as a worker starts, importing the URLconf, the API and the admin
# the worker never serves (0.3 CPU-seconds, docs/development/tests.md). ``manage.py migrate`` and
# ``manage.py check`` run them; CELERY_SKIP_CHECKS= (empty) runs them in the worker too.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")


def configure(app):
    """What the service needs of a Celery app: its CELERY_* settings (from Django's) and the tasks of the
    installed apps. A Django project with a Celery app of its own calls it on that app
    (docs/how-to/existing-django-project.md); importing this module connects the workers' and beat's
    hooks below, which hold for any app."""
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()
    return app


kombu_patches.install()
app = configure(Celery("scheduler_site"))

# Celery logs each task's return value at INFO: an HTTP run's result holds the response's headers,
# which may carry secrets (a token the server sends back). The run's row keeps the result.
trace.LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"


@worker_init.connect
@beat_init.connect
def harden(**kwargs):
    process.harden()  # the worker's main process (before its pool forks), beat


@worker_init.connect
def answer_remote_control_or_not(**kwargs):
    from django.conf import settings

    remote_control.install(settings.JOBS_REMOTE_CONTROL)


def keep_settings_logging(**kwargs):
    """LOG_FORMAT=json: the worker and beat log through settings.LOGGING (one JSON object per
    line), not Celery's own handlers."""
    from django.conf import settings

    from jobs.telemetry import logs

    logs.configure(settings.LOGGING)


def quietly(name):
    """The worker's or beat's program class without its banner: it prints plain text to stdout."""
    program = getattr(app, name)

    def __init__(self, *args, **kwargs):
        program.__init__(self, *args, **{**kwargs, "quiet": True})

    app.__dict__[name] = type(program.__name__, (program,), {"__init__": __init__, "__module__": __name__})


if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
    keep_settings_logging()  # at once, for Flower (started with --logging=none, scheduler_site.flower)
    setup_logging.connect(keep_settings_logging, weak=False)
    quietly("Worker")
    quietly("Beat")
