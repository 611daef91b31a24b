"""Registered functions (``jobs.kinds.callable.registry``), called in the worker's own process: Celery's soft time
limit stops one at its timeout."""

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
    if not isinstance(job.args, list):
        raise ValidationError({"args": "Must be a JSON list."})
    if not isinstance(job.kwargs, dict):
        raise ValidationError({"kwargs": "Must be a JSON object."})


def execute(context):
    job = context.job
    func = registry.get_function(job.target)
    if func is None:
        raise LookupError(f"function {job.target!r} is no longer registered on this worker")
    # The run's parameter values over the job's kwargs: a value given for this run is the more particular.
    kwargs = {**job.kwargs, **parameters.as_python(job.parameters, context.params)}
    if registry.wants_context(func):
        kwargs["context"] = context
    tail = context.output or OutputTail(settings.JOBS_OUTPUT_MAX_BYTES)
    try:
        with capture_prints(tail):
            result = func(*job.args, **kwargs)
    except SoftTimeLimitExceeded:
        raise JobTimedOut(f"Timed out after {job.timeout_seconds} s", *tail.snapshot()) from None
    try:
        json.dumps(result)
    except (TypeError, ValueError):
        result = repr(result)
    output, written = tail.snapshot()
    return Outcome(output=output, output_bytes=written, result=result)


def transactional(job):
    return registry.is_transactional(job.target)


KIND = JobKindSpec(
    name="callable", label="Registered function", execute=execute, validate=validate, fields=("args", "kwargs"),
    soft_time_limit=True, target_options=registry.registered_names, transactional=transactional,
)
