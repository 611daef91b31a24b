"""Which Celery tasks a ``task`` job may run: those registered with the Celery app whose module is one of
``JOBS_CALLABLE_MODULES`` (or inside one), the modules the service imports as it starts. Any other task (the
service's own, a library's) is refused by name when the job is saved."""

import contextlib

from celery import current_app
from celery._state import _task_stack
from django.conf import settings


def allowed_module(module):
    return any(module == allowed or module.startswith(allowed + ".") for allowed in settings.JOBS_CALLABLE_MODULES)


def get(name):
    """The registered task ``name`` when a job may run it, else None."""
    task = current_app.tasks.get(name) if isinstance(name, str) else None
    if task is None or not allowed_module(getattr(task, "__module__", "") or ""):
        return None
    return task


def choosable():
    """The names of the tasks a job may run, sorted."""
    return sorted(name for name, task in current_app.tasks.items()
                  if allowed_module(getattr(task, "__module__", "") or ""))


def refusal(name):
    """Why a job may not run ``name``."""
    known = ", ".join(choosable()) or "none"
    if isinstance(name, str) and name in current_app.tasks:
        return (f"The Celery task '{name}' is not in a module of JOBS_CALLABLE_MODULES "
                f"({', '.join(settings.JOBS_CALLABLE_MODULES)}); tasks a job may run: {known}.")
    return f"No Celery task named '{name}' in JOBS_CALLABLE_MODULES. Tasks a job may run: {known}."


@contextlib.contextmanager
def attempt_request(task, context, args, kwargs):
    """``task.request`` (and ``celery.current_task``) inside the block: the attempt's, as Celery's own call of a
    task pushes one. Called directly (``called_directly``), ``self.retry()`` raises at once."""
    _task_stack.push(task)
    task.push_request(args=args, kwargs=kwargs, idempotency_key=context.idempotency_key, attempt=context.attempt,
                      run_id=context.run_id, retries=context.attempt - 1)
    try:
        yield
    finally:
        task.pop_request()
        _task_stack.pop()
