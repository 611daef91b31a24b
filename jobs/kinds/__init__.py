"""The job kinds, each one package (``jobs/kinds/callable/``, ``task/``, ``command/``, ``http/``) that exports
``KIND``, a ``base.JobKindSpec``: what it runs, how it checks a job, the fields it uses and which
of them are secret, whether its jobs need the command-job permission, and how its result is shown.

They are listed once, by the package's dotted path, in the setting ``JOBS_KINDS`` (default: the
four). Everything else asks this registry and never names a kind: the model's choices and
validation, the permissions, the API, the pages, the admin, jobs-as-code, the command line, the
lifecycle's time limits and the worker. Adding a kind is one new package and its line in the setting.
"""

from functools import cache
from importlib import import_module

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .base import JobKindSpec, no_options

DEFAULT_KINDS = ("jobs.kinds.callable", "jobs.kinds.task", "jobs.kinds.command", "jobs.kinds.http",
                 "jobs.kinds.checkin")
NAME_MAX_LENGTH = 16  # Job.kind's column


def kinds():
    """The registered kinds by name, in the setting's order."""
    return registered("JOBS_KINDS", DEFAULT_KINDS, "KIND", JobKindSpec)


def registered(setting, default, attribute, spec_class, name_max_length=NAME_MAX_LENGTH):
    """The specs of the packages listed by dotted path in the setting ``setting`` (``default`` when
    unset), by name, in its order: each package exports ``attribute``, a ``spec_class``, named in
    1 to ``name_max_length`` characters. The channel kinds of notifications are loaded here too."""
    return _loaded(setting, attribute, spec_class, name_max_length, tuple(getattr(settings, setting, default)))


@cache
def _loaded(setting, attribute, spec_class, name_max_length, paths):
    found = {}
    for path in paths:
        spec = getattr(import_module(path), attribute, None)
        if not isinstance(spec, spec_class):
            raise ImproperlyConfigured(f"{setting}: {path} exports no {attribute} (a {spec_class.__name__}).")
        if spec.name in found or not 0 < len(spec.name) <= name_max_length:
            raise ImproperlyConfigured(f"{setting}: {path}: the kind's name {spec.name!r} is taken "
                                       f"or not 1 to {name_max_length} characters long.")
        found[spec.name] = spec
    return found


def get(name):
    """The kind named ``name``, or None when it is not registered (any more)."""
    return kinds().get(name)


def names():
    return list(kinds())


def choices():
    """(name, label) of each kind: Job.kind's choices, evaluated when asked."""
    return [(spec.name, spec.label) for spec in kinds().values()]


def needing_permission():
    """The names of the kinds whose jobs need the jobs.run_command_jobs permission."""
    return {spec.name for spec in kinds().values() if spec.needs_permission}


def fields_of(name):
    """The fields a job of kind ``name`` uses beyond its target ([] for an unknown kind)."""
    spec = get(name)
    return list(spec.fields) if spec else []


def secret_fields():
    """The fields some kind keeps secret."""
    return {name for spec in kinds().values() for name in spec.secret_fields}


def target_options():
    """{kind: the targets a job of it may name} of the kinds whose target is chosen from a list."""
    return {spec.name: list(spec.target_options()) for spec in kinds().values() if spec.target_options is not no_options}


def fieldsets():
    """[(kind names, their labels in words, fields)]: each kind's own fields, a field that several kinds use
    once, for all of them (as the job form and the admin group them)."""
    users = {}
    for spec in kinds().values():
        for name in spec.fields:
            users.setdefault(name, []).append(spec.name)
    sets = {}
    for name, names in users.items():
        sets.setdefault(tuple(names), []).append(name)
    return [(list(names), in_words([get(kind).label for kind in names]), fields) for names, fields in sets.items()]


def in_words(labels):
    """The labels as a sentence says them: A; A and B; A, B and C."""
    return " and ".join(filter(None, [", ".join(labels[:-1]), labels[-1]])) if labels else ""


def running_elsewhere():
    """The names of the kinds whose runs happen outside the service (the scheduler makes none)."""
    return {spec.name for spec in kinds().values() if spec.runs_elsewhere}
