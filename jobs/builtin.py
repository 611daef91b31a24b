"""Functions that ship with the service, registered so they can be scheduled at once."""

import time

from .kinds.callable.registry import job_function


@job_function("builtin.noop")
def noop():
    return None


@job_function("builtin.echo")
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@job_function("builtin.sleep")
def sleep(seconds=1.0):
    time.sleep(float(seconds))
    return {"slept": float(seconds)}


@job_function("builtin.fail")
def fail(message="failing on purpose"):
    raise RuntimeError(message)
