"""Resource limits and the user of a command job's processes.

Limits are rlimits set before the shell is executed, so they hold for the shell and everything it
starts: address space (memory), CPU seconds, open files, and processes. An isolated command gets
them from its namespace's zygote (``isolation``), a single-threaded process; an unisolated one from
util-linux ``prlimit``, which sets them on itself, rather than a ``preexec_fn``: Python code
between fork and exec can deadlock in a process with threads, and a worker has its heartbeat
thread.

A command whose job sets no process or open-files limit gets JOBS_COMMAND_RLIMIT_NPROC and
JOBS_COMMAND_RLIMIT_NOFILE.

A worker running as root drops to ``JOBS_COMMAND_USER`` (default ``nobody``) for the command,
unless ``JOBS_COMMANDS_AS_ROOT`` allows root. That also makes the process limit mean something:
RLIMIT_NPROC counts every process of the *user*, and root is exempt from it. A worker that is not
root cannot change user: its commands are refused unless ``JOBS_COMMAND_RUN_AS_SERVICE_USER``
allows them to run as the service's own user.
"""

import logging
import os
import pwd
import re
import resource
import shutil
import signal

from django.conf import settings
from django.core.exceptions import ValidationError

logger = logging.getLogger(__name__)

MB = 1024 * 1024

# What programs print when an allocation fails under RLIMIT_AS: Python, C (strerror of ENOMEM),
# Perl, C++, Java, Go.
MEMORY_ERROR = re.compile(
    r"MemoryError|Cannot allocate memory|Out of memory|out of memory|std::bad_alloc|OutOfMemoryError"
)


class LimitsUnavailable(Exception):
    pass


def validate(job):
    errors = {}
    directory = job.working_directory
    if directory and not os.path.isabs(directory):
        errors["working_directory"] = "Must be an absolute path, such as /srv/reports."
    elif directory and "\x00" in directory:
        errors["working_directory"] = "Must not contain NUL characters."
    if errors:
        raise ValidationError(errors)


def rlimits(job):
    """{resource name: (soft, hard)} of the job's limits and the defaults."""
    found = {}
    if job.memory_limit_mb:
        found["RLIMIT_AS"] = (job.memory_limit_mb * MB,) * 2
    if job.cpu_limit_seconds:
        # SIGXCPU at the soft limit (a clear cause), SIGKILL a second later for one that ignores it.
        found["RLIMIT_CPU"] = (job.cpu_limit_seconds, job.cpu_limit_seconds + 1)
    if open_files := job.max_open_files or _default(settings.JOBS_COMMAND_RLIMIT_NOFILE, resource.RLIMIT_NOFILE):
        found["RLIMIT_NOFILE"] = (open_files,) * 2
    if processes := job.max_processes or _default(settings.JOBS_COMMAND_RLIMIT_NPROC, resource.RLIMIT_NPROC):
        found["RLIMIT_NPROC"] = (processes,) * 2
    return found


PRLIMIT_OPTIONS = {"RLIMIT_AS": "--as", "RLIMIT_CPU": "--cpu", "RLIMIT_NOFILE": "--nofile", "RLIMIT_NPROC": "--nproc"}


def prlimit_argv(job):
    """The ``prlimit`` prefix of an unisolated command for the job's limits, or [] when it has none."""
    options = [f"{PRLIMIT_OPTIONS[name]}={soft}:{hard}" for name, (soft, hard) in rlimits(job).items()]
    if not options:
        return []
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise LimitsUnavailable("Cannot apply the command's resource limits (the job's, or JOBS_COMMAND_RLIMIT_NPROC "
                                "and JOBS_COMMAND_RLIMIT_NOFILE): prlimit (util-linux) is not installed on the worker.")
    return [prlimit, *options, "--"]


def _default(setting, which):
    """The default limit (0: none), no higher than the worker's own hard limit: only root may raise that."""
    hard = resource.getrlimit(which)[1]
    return setting if hard == resource.RLIM_INFINITY else min(setting, hard)


def run_as():
    """(Popen keyword arguments, environment overrides) for the user the command runs as.
    LimitsUnavailable on a worker that is not root, which cannot change user, unless
    JOBS_COMMAND_RUN_AS_SERVICE_USER allows the service's own user."""
    if os.geteuid() != 0:
        if settings.JOBS_COMMAND_RUN_AS_SERVICE_USER:
            return {}, {}
        raise LimitsUnavailable(
            f"Commands are refused on this worker: it runs as {_user_name()}, not root, so the command would run "
            "as the service's own user and could read its files (var/, the database, the keys). Run the worker "
            "as root (commands then run as JOBS_COMMAND_USER), or set JOBS_COMMAND_RUN_AS_SERVICE_USER=true "
            "to allow commands as the service's user.")
    if settings.JOBS_COMMANDS_AS_ROOT:
        return {}, {}
    try:
        user = pwd.getpwnam(settings.JOBS_COMMAND_USER)
    except KeyError:
        raise LimitsUnavailable(
            f"The worker runs as root and JOBS_COMMAND_USER '{settings.JOBS_COMMAND_USER}' does not exist "
            "on it; create the user, name another one, or set JOBS_COMMANDS_AS_ROOT=true.") from None
    if user.pw_uid == 0:
        raise LimitsUnavailable("JOBS_COMMAND_USER is root; set JOBS_COMMANDS_AS_ROOT=true to allow that.")
    home = user.pw_dir if os.path.isdir(user.pw_dir) else "/"
    env = {"HOME": home, "USER": user.pw_name, "LOGNAME": user.pw_name}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}, env


def report():
    """Say at worker start, on a worker that is not root, that its commands are refused, or that
    they run as the service's user."""
    if os.geteuid() == 0:
        return
    if settings.JOBS_COMMAND_RUN_AS_SERVICE_USER:
        logger.warning("JOBS_COMMAND_RUN_AS_SERVICE_USER=true: commands run as %s, the service's own user, and "
                       "can read every file it can (var/, the database, the keys)", _user_name())
    else:
        logger.error("COMMANDS REFUSED: this worker runs as %s, not root, so every command job on it will fail; "
                     "set JOBS_COMMAND_RUN_AS_SERVICE_USER=true to run them as the service's user", _user_name())


def _user_name():
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def explain_failure(job, returncode, output):
    """Why a command failed, naming the limit it ran into when there are signs of one.

    The kernel does not say which limit stopped a process. A memory limit shows as a failed
    allocation (the program prints MemoryError, "Cannot allocate memory"...) or a process killed by
    SIGSEGV/SIGABRT/SIGKILL; a CPU limit as SIGXCPU (then SIGKILL at the hard limit).
    """
    what = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    signum = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else None
    if job.cpu_limit_seconds and signum == signal.SIGXCPU:
        return f"Command failed: exceeded its CPU-time limit of {job.cpu_limit_seconds} s ({what})"
    if job.memory_limit_mb and (
        MEMORY_ERROR.search(output[-4000:]) or signum in (signal.SIGSEGV, signal.SIGABRT, signal.SIGKILL)
    ):
        return f"Command failed: exceeded its memory limit of {job.memory_limit_mb} MB ({what})"
    return f"Command failed: {what}"
