"""Where Celery's autodiscovery finds the jobs app's tasks."""

from .operations.tasks import check_slots, prune_runs  # noqa: F401
from .worker.bundle import execute_bundle  # noqa: F401
from .worker.task import execute_run  # noqa: F401
