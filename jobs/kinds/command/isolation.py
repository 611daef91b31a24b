"""Each command in a PID namespace of its own: a run's processes are its own (DESIGN.md, guarantee 5).

A pool process runs its commands through a zygote (``zygote.py``): a small program, the init (PID 1)
of a PID and mount namespace of its own with a /proc of its own, started once through

    unshare [--map-current-user] --pid --fork --mount-proc --kill-child python -I -S zygote.py FD

and forking each command from there, one at a time:

- A command sees its own processes in ``ps`` and /proc, and the zygote (root, not dumpable), no
  other command's, and so no other command's ``/proc/<pid>/environ``. Two commands never share a
  namespace at once: a pool process that runs two at a time (a thread pool) has two zygotes.
- When the command's shell ends, the zygote kills every process left in the namespace
  (``setsid``, a double fork, ``nohup``) and reaps them before it says how the command ended: what
  a command left running is dead when its run ends, and the next command starts in an empty
  namespace.
- Nothing outlives the worker. The zygote exits as soon as its socket to the pool process closes,
  which the kernel does when the pool process dies however it dies; when a namespace's init exits,
  the kernel kills everything in it. Celery's prefork pool processes get SIGKILL when the worker's
  main process dies. So a SIGKILL of the pool process or of the worker kills the command within
  milliseconds, long before the run's heartbeat goes stale and the monitor reruns it.
- On a root worker the command drops to ``JOBS_COMMAND_USER`` (no supplementary groups) after its
  limits and directory are set. A worker that is not root first makes a user namespace mapping its
  user to itself (``--map-current-user``): the command keeps its user and has no capabilities.
  That needs unprivileged user namespaces (``user.max_user_namespaces`` > 0; on some kernels
  ``kernel.unprivileged_userns_clone=1``, or AppArmor allowing them).
- The zygote sets no-new-privileges on itself, so nothing a command executes gains privileges (a
  setuid or setcap program runs with the command's own), whatever user it runs as.
- Costs: a command used to start through setpriv, prlimit, unshare, setpriv, an init shell and
  env, six programs executed before its own shell (7.5 ms of CPU for ``true``); from the zygote it
  is a fork and its shell (docs/BENCHMARKS.md).

``JOBS_COMMAND_ISOLATION``: ``auto`` and ``namespace`` fail a command rather than run it without
isolation where the host cannot isolate it (Ubuntu 24.04's AppArmor, a container's seccomp), naming
why, and say so loudly at worker start (``report``); ``off``, set on purpose, runs commands in a
process group of their own, killed as a group.
"""

import contextlib
import functools
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings

from . import zygote

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 10
ZYGOTE = str(Path(zygote.__file__))

OFF_HINT = "set JOBS_COMMAND_ISOLATION=off to run commands without isolation, knowing what is lost"
WHAT_IS_LOST = ("commands are not isolated: a command sees every process on the host and can read the "
                "environment (secrets included) of every other command running as the same user, and what a "
                "command leaves running (setsid, nohup, a double fork) outlives its run and its worker")


class IsolationUnavailable(Exception):
    pass


def _namespaces():
    unshare = shutil.which("unshare")
    if unshare is None:
        raise IsolationUnavailable("unshare (util-linux) not installed")
    user = [] if os.geteuid() == 0 else ["--map-current-user"]
    return [unshare, *user, "--pid", "--fork", "--mount-proc", "--kill-child"]


@functools.cache
def _probe(euid):
    """Why commands cannot be isolated on this host for this user, or "" when they can."""
    try:
        done = subprocess.run([*_namespaces(), "/bin/sh", "-c", "true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_SECONDS)
    except IsolationUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare could not be run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        hint = "" if euid == 0 else " (are unprivileged user namespaces allowed?)"
        return f"unshare failed: {said}{hint}"
    return ""


def unavailable():
    """Why this host cannot isolate commands, or "" (found once per process and user)."""
    return _probe(os.geteuid())


def wanted():
    """Whether the next command runs in its own namespaces; IsolationUnavailable when the setting
    asks for them (``auto``, ``namespace``) and the host cannot: fail closed."""
    mode = settings.JOBS_COMMAND_ISOLATION
    if mode == "off":
        return False
    if reason := unavailable():
        raise IsolationUnavailable(f"Cannot isolate the command (JOBS_COMMAND_ISOLATION={mode}): {reason}; {OFF_HINT}")
    return True


def no_new_privileges():
    """The prefix that keeps an unisolated command from gaining privileges (setuid programs), or []
    without setpriv."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--no-new-privs"] if setpriv else []


class Zygote:
    """One namespace's init (``zygote.py``) and the socket to it, owned by the process that started it."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [*_namespaces(), sys.executable, "-I", "-S", ZYGOTE, str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), env={}, start_new_session=True)
        except OSError as exc:
            ours.close()
            raise IsolationUnavailable(f"unshare could not be run: {exc}") from None
        finally:
            theirs.close()
        self.socket, self.owner = ours, os.getpid()

    def send(self, message, fds=()):
        zygote.send(self.socket, message, fds)

    def receive(self, timeout):
        """The zygote's next message, None when none came within ``timeout`` (None: wait), or
        ``{"gone": true}`` when the zygote is gone."""
        if not select.select([self.socket], [], [], timeout)[0]:
            return None
        try:
            message, _ = zygote.receive(self.socket)
        except (EOFError, OSError):
            message = None
        return message if message is not None else {"gone": True}

    def close(self):
        self.socket.close()
        if self.owner == os.getpid():
            self.process.wait()


_idle = []
_idle_lock = threading.Lock()


def _forget_after_fork():
    """A forked process (Celery's pool) starts its own zygotes: the parent's stay the parent's. The
    lock is made anew: another thread of the parent may have held it at the fork."""
    global _idle_lock
    _idle_lock = threading.Lock()
    for inherited in _idle:
        inherited.socket.close()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def close_idle():
    """End this process's idle zygotes (each ends its namespace)."""
    with _idle_lock:
        while _idle:
            _idle.pop().close()


def _zygote():
    with _idle_lock:
        while _idle:
            found = _idle.pop()
            if found.process.poll() is None:
                return found
            found.close()
    return Zygote()


class Command:
    """A command started in a zygote's namespace, read as a ``subprocess.Popen``: ``stdout``,
    ``poll()``, ``wait(timeout)``, ``returncode`` (-N for a death by signal N)."""

    def __init__(self, zygote_, stdout):
        self.zygote, self.stdout, self.returncode = zygote_, stdout, None

    def poll(self):
        return self._await(0)

    def wait(self, timeout=None):
        if self._await(timeout) is None:
            raise subprocess.TimeoutExpired("command", timeout)
        return self.returncode

    def _await(self, timeout):
        if self.returncode is None:
            message = self.zygote.receive(timeout)
            if message is None:
                return None
            if "exit" in message:
                self.returncode = message["exit"]
                with _idle_lock:
                    _idle.append(self.zygote)
            else:  # the zygote died, and its namespace with it
                logger.error("a command's zygote ended unexpectedly (%s)", message)
                self.returncode = -9
                self.zygote.close()
        return self.returncode

    def signal_group(self, signum):
        """``signum`` to the command's process group (what left it escapes: see ``kill``)."""
        self._tell({"signal": signum})

    def kill(self):
        """SIGKILL every process of the namespace."""
        self._tell({"kill": True})

    def _tell(self, message):
        if self.returncode is None:
            with contextlib.suppress(OSError):  # the zygote is gone, and its namespace with it: wait() says so
                self.zygote.send(message)


def start(target, env, cwd, umask, run_as, rlimits):
    """``/bin/sh -c target`` in a namespace of its own, as ``run_as`` (limits.run_as()'s Popen
    keyword arguments), under ``rlimits`` ({"RLIMIT_…": (soft, hard)}): a ``Command``. OSError
    when it cannot be started (a missing directory), as Popen raises it."""
    request = {"argv": ["/bin/sh", "-c", target], "env": env, "cwd": cwd, "umask": umask,
               "uid": run_as.get("user"), "gid": run_as.get("group"), "rlimits": rlimits}
    for _ in range(2):  # an idle zygote may have died meanwhile: then a new one
        found = _zygote()
        read, write = os.pipe2(os.O_CLOEXEC)
        try:
            found.send({"start": request}, [write])
            answer = found.receive(None)
        except OSError:
            answer = {"gone": True}
        finally:
            os.close(write)
        if "started" in answer:
            return Command(found, os.fdopen(read, "rb"))
        os.close(read)
        if "error" in answer:
            with _idle_lock:
                _idle.append(found)
            raise OSError(*answer["error"])
        found.close()
    raise IsolationUnavailable("the command's namespace could not be made: its zygote ended at once")


def report():
    """Say at worker start how commands run here; loudly where they are not isolated."""
    mode = settings.JOBS_COMMAND_ISOLATION
    if mode == "off":
        logger.warning("JOBS_COMMAND_ISOLATION=off: %s", WHAT_IS_LOST)
        return
    reason = unavailable()
    if not reason:
        logger.info("commands run in PID and mount namespaces of their own (JOBS_COMMAND_ISOLATION=%s)", mode)
    else:
        logger.error("COMMAND ISOLATION UNAVAILABLE (%s): every command job on this worker will fail "
                     "(JOBS_COMMAND_ISOLATION=%s); %s. See docs/guide/jobs.md, What a command can see.",
                     reason, mode, OFF_HINT)
