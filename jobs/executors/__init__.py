"""One module per job kind, each with the same small interface:

- ``validate(job)`` raises a ``ValidationError`` keyed by field when the job cannot run;
- ``execute(context)`` runs one attempt and returns an ``Outcome``, or raises ``JobFailed`` or
  ``JobTimedOut`` (each carrying the output captured so far).
"""

import importlib
from dataclasses import dataclass, field


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
    cancelled: object = field(default=None, repr=False)  # a threading.Event set on cancel/lost
    # The attempt's OutputTail, which the worker's heartbeat thread saves while the attempt runs;
    # an executor that finds none keeps its own.
    output: object = field(default=None, repr=False)


def get_executor(kind):
    return importlib.import_module(f"jobs.executors.{kind}_kind")
