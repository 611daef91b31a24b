"""The allow-list of Python functions a `callable` job may run.

A function becomes runnable only by being decorated with ``@job_function``; a job naming anything
else fails validation when it is defined, not when it runs.

``@job_function(transactional=True)`` marks a function whose only effects are rows in the service's
own database: each attempt runs inside one transaction with the recording of its outcome, so its
writes and its success commit together or not at all (exactly once; docs/guide/exactly-once.md).
"""

import functools
import importlib
import inspect

_registry = {}


def job_function(name=None, *, transactional=False):
    def register(func):
        key = name or f"{func.__module__}.{func.__qualname__}"
        existing = _registry.get(key)
        if existing is not None and existing is not func:
            raise ValueError(f"job function {key!r} is registered twice")
        _registry[key] = func
        func.job_function_name = key
        func.job_transactional = bool(transactional)
        return func

    return register


def get_function(name):
    return _registry.get(name)


def is_transactional(name):
    """Whether the function registered as ``name`` runs in one transaction with its outcome."""
    return getattr(_registry.get(name), "job_transactional", False)


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
