"""Keep commands out of the worker's memory and environment.

A command runs as the worker's own user when the worker is not root. Without this, that user may
read /proc/<worker pid>/environ (DATABASE_URL, SECRET_KEY, JOBS_SECRETS_KEYS...) and attach to the
worker's memory. A process that is not "dumpable" has its /proc files owned by root and refuses
ptrace to anyone without CAP_SYS_PTRACE (prctl(2), PR_SET_DUMPABLE). The flag survives fork (the
prefork pool's children) and is reset by execve, so commands themselves stay ordinary processes.
"""

import ctypes
import logging
import sys

logger = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def make_undumpable():
    """Returns whether the process is now not dumpable (False off Linux, where there is no prctl)."""
    if not sys.platform.startswith("linux"):
        logger.warning("not Linux: the worker stays dumpable; run commands as another user (JOBS_COMMAND_USER)")
        return False
    libc = _libc()
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, "prctl(PR_SET_DUMPABLE, 0) failed")
    return True


def is_dumpable():
    return bool(_libc().prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
