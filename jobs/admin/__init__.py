"""The Django admin (its autodiscovery imports ``jobs.admin``): jobs and their runs (``jobs.py``, with
the job's form, ``forms.py``), limits shared across jobs (``limits.py``), the calendars
(``calendars.py``), teams' quotas and maintenance windows (below) and django-celery-beat's periodic tasks with a permission
on each action (``beat.py``). The resources declared once (``jobs.resources``) are admins of
``through_actions.ResourceAdmin``."""

from ..actions.quotas import TEAM_FIELDS
from ..resources import QUOTAS, WINDOWS
from . import beat, calendars, jobs, limits  # noqa: F401  (registering is importing)
from .through_actions import register

register(QUOTAS, fields=("group", *TEAM_FIELDS), list_select_related=("group",))
register(WINDOWS, fields=(*WINDOWS.file.fields, "owner"), list_filter=("mode",))
