"""The allow-list of Python functions a `callable` job may run.

A function becomes runnable only by being decorated with ``@job_function``; a job naming anything
else fails validation when it is defined, not when it runs.
"""

import functools
import importlib
import inspect

_registry = {}


def job_function(name=None):
    def register(func):
        key = name or f"{func.__module__}.{func.__qualname__}"
        existing = _registry.get(key)
        if existing is not None and existing is not func:
            raise ValueError(f"job function {key!r} is registered twice")
        _registry[key] = func
        func.job_function_name = key
        return func

    return register


def get_function(name):
    return _registry.get(name)


def registered_names():
    return sorted(_registry)


def load_modules(modules):
    for module in modules:
        importlib.import_module(module)


@functools.cache  # asked on every run; inspect.signature is slow
def wants_context(func):
    try:
        return "context" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
