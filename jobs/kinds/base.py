"""What a job kind is: the one object (``KIND``) its package exports, and what its ``execute`` gets
and gives.

``validate(job)`` raises a ``ValidationError`` keyed by field when the job cannot run (the model's
``clean`` calls it, so the API, the pages, the admin and jobs-as-code all check a job the same way);
``execute(context)`` runs one attempt and returns an ``Outcome``, or raises ``JobFailed`` or
``JobTimedOut`` (each carrying the output captured so far).
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ..access import secrets


@dataclass
class Outcome:
    output: str = ""
    output_bytes: int = 0
    result: object = None


class JobFailed(Exception):
    def __init__(self, message, output="", output_bytes=0):
        super().__init__(message)
        self.output = output
        self.output_bytes = output_bytes


class JobTimedOut(JobFailed):
    pass


@dataclass
class RunContext:
    """What an attempt knows about itself; job code receives it as ``context``."""

    run_id: int
    attempt: int
    job: object
    timeout_seconds: float
    # The run's (JobRun.idempotency_key): the same on every attempt; the worker gives it.
    idempotency_key: str = ""
    # The values of the job's parameters the run was given, the defaults filled in (JobRun.params).
    params: dict = field(default_factory=dict)
    cancelled: object = field(default=None, repr=False)  # a threading.Event set on cancel/lost
    # The attempt's OutputTail, which the worker's heartbeat thread saves while the attempt runs;
    # a kind that finds none keeps its own.
    output: object = field(default=None, repr=False)


def no_check(job):
    pass


def no_options():
    return []


def no_destination(job):
    return None


def never(job):
    return False


def nothing():
    pass


def result_as_json(result):
    return json.dumps(result, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class JobKindSpec:
    name: str  # stored in Job.kind (16 characters at most)
    label: str  # as the API's schema, the pages and the admin offer it
    execute: Callable  # execute(context) -> Outcome; raises JobFailed or JobTimedOut
    validate: Callable = no_check  # validate(job); raises ValidationError keyed by field
    # The job's fields (jobs.definitions.fields, KIND_FIELDS) this kind uses beyond its target: shown, sent
    # and described for a job of this kind only.
    fields: tuple = ()
    # Of those, the ones whose values are secrets (stored encrypted, write-only, jobs.access.secrets; the
    # audit trail and `jobs show` give their keys only).
    secret_fields: tuple = ()
    # destination(job): where the job's secret values are sent ("https://host:443"), or None when
    # they stay on the worker; secret values given for one destination are bound to it.
    destination: Callable = no_destination
    # Whether creating, changing, running or cancelling a job of this kind needs the
    # jobs.run_command_jobs permission (it runs code of the job's author on the workers).
    needs_permission: bool = False
    # Whether Celery's soft time limit stops an attempt at its timeout (code running in the worker's
    # own process); a kind that stops itself at its timeout gets only the hard limit, as a backstop.
    soft_time_limit: bool = False
    # transactional(job): whether an attempt of ``job`` runs inside one transaction on the service's
    # database with the recording of its outcome (exactly once for jobs whose effects are rows there).
    transactional: Callable = never
    target_options: Callable = no_options  # suggestions for the target, as the job form offers them
    field_options: dict = field(default_factory=dict)  # {field: suggestions} for the kind's own fields
    result_title: str = "Result"  # what the run page calls what a run returned
    result_text: Callable = result_as_json  # result_text(result): how the run page shows it
    worker_start: Callable = nothing  # what it does when a worker starts, before its pool forks
    when_empty: dict = field(default_factory=dict)  # {field: what an empty value means}, as `jobs show` says it
    # Whether its runs happen outside the service and are reported to it (jobs.lifecycle.pings): the
    # scheduler makes no run for their slots and nothing publishes a message for them.
    runs_elsewhere: bool = False

    def described(self, job):
        """(field, value) of the kind's own fields of ``job`` as ``manage.py jobs show`` lists them:
        secrets masked, an empty value as what it means, or "-"."""
        shown = []
        for name in self.fields:
            value = getattr(job, name)
            if name in self.secret_fields:
                value = secrets.masked(value)
            elif name in self.when_empty and not value or value in ("", None):
                value = self.when_empty.get(name, "-")
            shown.append((name, value))
        return shown
