"""Shell commands, each in PID and mount namespaces of its own (``isolation``: nothing of a run
outlives it or its worker, and no command sees another's processes), or, with isolation off, in a
process group of its own so that a timeout kills the whole tree."""

import contextlib
import fnmatch
import os
import signal
import subprocess
import threading
import time

from django.conf import settings
from django.core.exceptions import ValidationError

from ... import parameters
from ...access import secrets
from ...execution.output import OutputTail
from ..base import JobFailed, JobKindSpec, JobTimedOut, Outcome
from . import isolation, limits

# The service's processes write with umask 077 (scheduler_site.process); a command's files are as a
# login shell's would be.
COMMAND_UMASK = 0o022


def validate(job):
    if not settings.JOBS_COMMANDS_ENABLED:
        raise ValidationError({"kind": "Command jobs are switched off (JOBS_COMMANDS_ENABLED)."})
    if not job.target.strip():
        raise ValidationError({"target": "A command job needs a command."})
    for field in ("environment", "secret_environment"):
        env = getattr(job, field)
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValidationError({field: "Must be a JSON object of string names to string values."})
    if both := set(job.environment) & set(job.secret_environment):
        raise ValidationError({"secret_environment": f"Given in environment too: {', '.join(sorted(both))}."})
    taken = set(job.environment) | set(job.secret_environment)
    if clashes := sorted(name for name in parameters.declared_names(job.parameters)
                         if parameters.env_name(name) in taken):
        raise ValidationError({"parameters": [
            f"{name}: its value is given as {parameters.env_name(name)}, which the environment sets already."
            for name in clashes]})
    limits.validate(job)


def inherited_environment(environ=None):
    """The worker's variables a command gets: those JOBS_COMMAND_ENV_ALLOW names (an allow-list:
    the service's secrets, the cloud's credentials, the exporters' headers stay out), less
    JOBS_COMMAND_ENV_EXCLUDE."""
    environ = os.environ if environ is None else environ
    allowed, excluded = settings.JOBS_COMMAND_ENV_ALLOW, settings.JOBS_COMMAND_ENV_EXCLUDE
    return {name: value for name, value in environ.items()
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)
            and not any(fnmatch.fnmatchcase(name, pattern) for pattern in excluded)}


def _signal_group(process, sig):
    if isinstance(process, isolation.Command):
        process.signal_group(sig)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def execute(context):
    job = context.job
    try:
        user_kwargs, user_env = limits.run_as()
        isolated = isolation.wanted()
        prefix = [] if isolated else limits.prlimit_argv(job)
        hidden = secrets.reveal(job.secret_environment)
    except (limits.LimitsUnavailable, isolation.IsolationUnavailable, secrets.SecretsUnavailable) as exc:
        raise JobFailed(str(exc)) from None
    inherited = inherited_environment()
    # The parameters' values reach the command as environment variables only, never in its text: a
    # value such as "$(rm -rf /)" stays a value (the shell does not read it as code).
    env = {**inherited, **user_env, **job.environment, **hidden, **parameters.environment(context.params),
           "JOB_RUN_ID": str(context.run_id),
           "JOB_ATTEMPT": str(context.attempt), "JOB_IDEMPOTENCY_KEY": context.idempotency_key}
    tail = context.output or OutputTail(settings.JOBS_OUTPUT_MAX_BYTES)
    try:
        if isolated:
            process = isolation.start(job.target, env, job.working_directory or None, COMMAND_UMASK, user_kwargs,
                                      limits.rlimits(job))
        else:
            process = subprocess.Popen(
                [*isolation.no_new_privileges(), *prefix, "/bin/sh", "-c", job.target], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                cwd=job.working_directory or None, umask=COMMAND_UMASK, **user_kwargs,
            )
    except isolation.IsolationUnavailable as exc:
        raise JobFailed(str(exc)) from None
    except OSError as exc:  # a working directory that is missing or not a directory
        where = f" in {job.working_directory}" if job.working_directory else ""
        raise JobFailed(f"Cannot start the command{where}: {exc.strerror}") from None
    reader = threading.Thread(target=_drain, args=(process.stdout, tail), daemon=True)
    reader.start()
    deadline = time.monotonic() + context.timeout_seconds
    stop_reason = None
    while process.poll() is None:
        if time.monotonic() >= deadline:
            stop_reason = "timeout"
        elif context.cancelled is not None and context.cancelled.is_set():
            stop_reason = "cancelled"
        if stop_reason:
            _terminate(process)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):  # returns as soon as the command ends
            process.wait(timeout=0.05)
    if not isolated:
        # Whatever the command left behind in its group goes with it, so no grandchild holding the
        # pipe keeps the reader waiting (in a namespace, the zygote killed it before it answered).
        _signal_group(process, signal.SIGKILL)
    returncode = process.returncode
    reader.join(timeout=2)
    # The text and its count at one moment: a reader still draining the pipe (a process that left
    # the group holds it) may write between two reads, and the count would run ahead of the text.
    output, written = tail.snapshot()
    if stop_reason == "timeout":
        raise JobTimedOut(f"Timed out after {job.timeout_seconds} s; process group killed", output, written)
    if stop_reason == "cancelled":
        raise JobFailed("Stopped: the run was cancelled or taken over", output, written)
    if returncode != 0:
        raise JobFailed(limits.explain_failure(job, returncode, output), output, written)
    return Outcome(output=output, output_bytes=written)


def _terminate(process):
    _signal_group(process, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=settings.JOBS_KILL_GRACE_SECONDS)
    if isinstance(process, isolation.Command):
        process.kill()  # the whole namespace
    else:
        _signal_group(process, signal.SIGKILL)
    process.wait()


def _drain(stream, tail):
    for chunk in iter(lambda: stream.read1(65536), b""):
        tail.write(chunk)
    stream.close()


def worker_start():
    """Say at worker start how commands run here: as whom, and whether isolated."""
    limits.report()
    isolation.report()


KIND = JobKindSpec(
    name="command", label="Shell command", execute=execute, validate=validate,
    fields=("environment", "secret_environment", "working_directory", "memory_limit_mb", "cpu_limit_seconds",
            "max_open_files", "max_processes"),
    secret_fields=("secret_environment",), needs_permission=True,
    worker_start=worker_start,
)
