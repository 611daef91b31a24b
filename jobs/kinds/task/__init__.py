"""Celery tasks of the user's own code, by their registered name (``jobs.kinds.task.tasks``), run the way a
registered function is (``jobs.kinds.callable``): the task's function is called inside the attempt, in the worker's
own process, never sent as a Celery message of its own. So the job's timeout, retries, heartbeats, output and
stored result hold for it as for any job.

A ``bind=True`` task finds the attempt on ``self.request`` (``idempotency_key``, ``attempt``, ``run_id``,
``retries``), and any task on ``celery.current_task.request``. ``self.retry()`` fails the attempt: the job's
``max_retries`` and backoff decide what follows, not the task's own retry options.
"""

import inspect

from django.core.exceptions import ValidationError

from ..base import JobKindSpec
from ..callable import arguments, call_in_attempt, check_arguments
from . import tasks


def validate(job):
    task = tasks.get(job.target)
    if task is None:
        raise ValidationError({"target": tasks.refusal(job.target)})
    check_arguments(job)
    check_signature(task, job)


def check_signature(task, job):
    """The job's args, kwargs and parameters bind to the task's signature; else an error on the field that
    does not fit (a required argument nobody gives is the kwargs')."""
    signature = inspect.signature(task.run)
    declared = {p["name"]: None for p in job.parameters or [] if isinstance(p, dict) and "name" in p}
    steps = (("args", lambda: signature.bind_partial(*job.args)),
             ("kwargs", lambda: signature.bind_partial(*job.args, **job.kwargs)),
             ("parameters", lambda: signature.bind_partial(*job.args, **{**job.kwargs, **declared})),
             ("kwargs", lambda: signature.bind(*job.args, **{**job.kwargs, **declared})))
    for field, bind in steps:
        try:
            bind()
        except TypeError as exc:
            raise ValidationError({field: f"Does not fit the task {task.name}{signature}: {exc}."}) from None


def execute(context):
    task = tasks.get(context.job.target)
    if task is None:
        raise LookupError(f"{tasks.refusal(context.job.target)} (on this worker)")
    args, kwargs = arguments(context)
    with tasks.attempt_request(task, context, args, kwargs):
        return call_in_attempt(context, task.run, args, kwargs)


KIND = JobKindSpec(
    name="task", label="Celery task", execute=execute, validate=validate, fields=("args", "kwargs"),
    soft_time_limit=True, target_options=tasks.choosable,
)
