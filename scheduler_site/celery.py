import os

from celery import Celery

from . import kombu_patches

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")

kombu_patches.install()
app = Celery("scheduler_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
