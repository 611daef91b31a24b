"""The Django admin (its autodiscovery imports ``jobs.admin``): jobs and their runs (``jobs.py``, with
the job's form, ``forms.py``), limits shared across jobs (``limits.py``), teams' quotas (``quotas.py``), the calendars (``calendars.py``)
and django-celery-beat's periodic tasks with a permission on each action (``beat.py``)."""

from . import beat, calendars, jobs, limits, quotas  # noqa: F401  (registering is importing)
