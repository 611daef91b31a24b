"""The Django admin (its autodiscovery imports ``jobs.admin``): jobs and their runs (``jobs.py``, with
the job's form, ``forms.py``), and django-celery-beat's periodic tasks with a permission on each
action (``beat.py``), and the calendars (``calendars.py``)."""

from . import beat, calendars, jobs  # noqa: F401  (registering is importing)
