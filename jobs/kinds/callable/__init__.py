"""Registered functions (``jobs.kinds.callable.registry``), called in the worker's own process: Celery's soft time
limit stops one at its timeout. ``check_arguments``, ``arguments`` and ``call_in_attempt`` are the part its
sibling, the ``task`` kind (a Celery task's function), runs the same way."""

import json

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.exceptions import ValidationError

from ... import parameters
from ...execution.output import OutputTail, capture_prints
from ..base import JobKindSpec, JobTimedOut, Outcome
from . import registry


def validate(job):
    if registry.get_function(job.target) is None:
        known = ", ".join(registry.registered_names()) or "none"
        raise ValidationError(
            {"target": f"No registered function named '{job.target}'. Registered: {known}."}
        )
    check_arguments(job)


def check_arguments(job):
    if not isinstance(job.args, list):
        raise ValidationError({"args": "Must be a JSON list."})
    if not isinstance(job.kwargs, dict):
        raise ValidationError({"kwargs": "Must be a JSON object."})


def arguments(context):
    """(args, kwargs) of the attempt: the run's parameter values over the job's kwargs (a value given for this
    run is the more particular)."""
    job = context.job
    return list(job.args), {**job.kwargs, **parameters.as_python(job.parameters, context.params)}


def call_in_attempt(context, func, args, kwargs):
    """Call ``func`` as the attempt: what it prints is the attempt's output, Celery's soft time limit its timeout,
    what it returns its result (JSON as it is, anything else its repr)."""
    tail = context.output or OutputTail(settings.JOBS_OUTPUT_MAX_BYTES)
    try:
        with capture_prints(tail):
            result = func(*args, **kwargs)
    except SoftTimeLimitExceeded:
        raise JobTimedOut(f"Timed out after {context.job.timeout_seconds} s", *tail.snapshot()) from None
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = repr(result)
    output, written = tail.snapshot()
    return Outcome(output=output, output_bytes=written, result=result)


def execute(context):
    func = registry.get_function(context.job.target)
    if func is None:
        raise LookupError(f"function {context.job.target!r} is no longer registered on this worker")
    args, kwargs = arguments(context)
    if registry.wants_context(func):
        kwargs["context"] = context
    return call_in_attempt(context, func, args, kwargs)


def transactional(job):
    return registry.is_transactional(job.target)


KIND = JobKindSpec(
    name="callable", label="Registered function", execute=execute, validate=validate, fields=("args", "kwargs"),
    soft_time_limit=True, target_options=registry.registered_names, transactional=transactional,
)
