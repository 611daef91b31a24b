"""The run a log line is about: the worker sets it around an attempt, the lifecycle around a run's
events, the notifications around a delivery; ``RunFilter`` (in settings.LOGGING) puts it on every
record, so that ``LOG_FORMAT=json`` lines carry ``run_id``, ``job`` and ``attempt`` where there is one."""

import contextlib
import contextvars
import logging
import logging.config

_about = contextvars.ContextVar("jobs_log_run", default=None)


@contextlib.contextmanager
def about_run(run_id, attempt=None, job=None):
    """Log records made inside are about this run (``job``: its name)."""
    current = _about.get()
    if current is not None and (current["run_id"], current["attempt"]) == (run_id, attempt):
        yield  # about it already (the worker's task_prerun)
        return
    token = _about.set({"run_id": run_id, "attempt": attempt, "job": job})
    try:
        yield
    finally:
        _about.reset(token)


def begin(run_id, attempt):
    """The records from here on are about this run, until ``clear`` (Celery's task_prerun and
    task_postrun, so that Celery's own lines on the task, its success or its failure, carry it)."""
    _about.set({"run_id": run_id, "attempt": attempt, "job": None})


def clear():
    _about.set(None)


def about(run):
    """Records made inside are about ``run`` (a JobRun, or None: nothing changes), unless they are
    about a run already (the worker's attempt)."""
    if run is None or _about.get() is not None:
        return contextlib.nullcontext()
    return about_run(run.pk, run.attempt)


def name_job(job):
    """Name the job of the run the records are about, once it is known (after the claim)."""
    current = _about.get()
    if current is not None:
        current["job"] = job


class RunFilter(logging.Filter):
    """Adds ``run_id``, ``job`` and ``attempt`` to a record made about a run (and nothing to the others)."""

    def filter(self, record):
        current = _about.get()
        if current is not None:
            for name, value in current.items():
                if value is not None and not hasattr(record, name):
                    setattr(record, name, value)
        return True


def configure(config):
    """settings.LOGGING_CONFIG: ``config`` applied, and Python's warnings logged through it (a
    warning written to stderr as it comes would be a plain-text line among the JSON ones)."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
