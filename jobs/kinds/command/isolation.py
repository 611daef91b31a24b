"""Each command in a PID namespace of its own: a run's processes are its own (DESIGN.md, guarantee 5).

A command starts through util-linux programs, with no Python code between fork and exec (the
worker has threads):

    setpriv --no-new-privs --pdeathsig KILL [prlimit LIMITS --] unshare --pid --fork --mount-proc --kill-child
        [setpriv --reuid U --regid G --clear-groups --pdeathsig KILL] /bin/sh -c INIT job-init TARGET

- ``unshare`` forks the first process of a new PID namespace (its init, PID 1) in a new mount
  namespace with a /proc of its own: the command sees its own processes in ``ps`` and /proc, no
  other command's, and so no other command's ``/proc/<pid>/environ``.
- When the init of a PID namespace ends, the kernel kills everything left in it, and unshare
  returns only after that: what the command left running (``setsid``, a double fork, ``nohup``)
  is dead when the run ends.
- Nothing outlives the worker. ``--kill-child``: PID 1 gets SIGKILL when unshare dies. The outer
  ``setpriv --pdeathsig KILL``: unshare gets SIGKILL when the thread that started it dies (the
  task's thread, in the pool process). Celery's prefork pool processes get SIGKILL when the
  worker's main process dies. So a SIGKILL of the pool process or of the worker kills the command
  within milliseconds, long before the run's heartbeat goes stale and the monitor reruns it.
- On a root worker the command drops to ``JOBS_COMMAND_USER`` inside the namespace, after /proc is
  mounted, through the inner ``setpriv``: unshare's own ``--setuid`` would clear PID 1's
  parent-death signal (a change of credentials clears it), setpriv sets it again after the change.
  A worker that is not root first makes a user namespace mapping its user to itself
  (``--map-current-user``): the command keeps its user and has no capabilities. That needs
  unprivileged user namespaces (``user.max_user_namespaces`` > 0; on some kernels
  ``kernel.unprivileged_userns_clone=1``, or AppArmor allowing them).
- PID 1 is INIT, a small shell, not the command: the kernel drops a signal sent to a namespace's
  init that it has no handler for, SIGKILL aside, so a command as PID 1 would shrug off SIGTERM at
  its timeout and SIGXCPU at its CPU limit. INIT runs the command's shell as its child (SIGINT
  and SIGQUIT back to their defaults, which a background job of a shell loses) and exits with its
  status. A shell reports a death by signal N as status 128 + N, and ``returncode`` reads it back
  as -N, so a command that exits 129..192 itself is reported as killed by that signal.

- ``--no-new-privs``: nothing the command executes gains privileges (a setuid or setcap program
  runs with the command's own), whatever user it runs as.

``JOBS_COMMAND_ISOLATION``: ``auto`` and ``namespace`` fail a command rather than run it without
isolation where the host cannot isolate it (Ubuntu 24.04's AppArmor, a container's seccomp), naming
why, and say so loudly at worker start (``report``); ``off``, set on purpose, runs commands in a
process group of their own, killed as a group.
"""

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess

from django.conf import settings

logger = logging.getLogger(__name__)

INIT = 'env --default-signal=INT,QUIT /bin/sh -c "$1" & exec 2>/dev/null; wait $!'
PROBE_TIMEOUT_SECONDS = 10

OFF_HINT = "set JOBS_COMMAND_ISOLATION=off to run commands without isolation, knowing what is lost"
WHAT_IS_LOST = ("commands are not isolated: a command sees every process on the host and can read the "
                "environment (secrets included) of every other command running as the same user, and what a "
                "command leaves running (setsid, nohup, a double fork) outlives its run and its worker")


class IsolationUnavailable(Exception):
    pass


def _programs():
    found = {name: shutil.which(name) for name in ("setpriv", "unshare")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise IsolationUnavailable(f"{' and '.join(missing)} (util-linux) not installed")
    return found["setpriv"], found["unshare"]


def _namespaces(unshare):
    user = [] if os.geteuid() == 0 else ["--map-current-user"]
    return [unshare, *user, "--pid", "--fork", "--mount-proc", "--kill-child"]


@functools.cache
def _probe(euid):
    """Why commands cannot be isolated on this host for this user, or "" when they can."""
    try:
        setpriv, unshare = _programs()
        done = subprocess.run([setpriv, "--pdeathsig", "KILL", *_namespaces(unshare), "/bin/sh", "-c", "true"],
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


def argv(limits_prefix, run_as, target):
    """(argv, Popen keyword arguments) of ``target`` in namespaces of its own. ``run_as``: the Popen
    keyword arguments of limits.run_as(), which the inner setpriv applies instead."""
    setpriv, unshare = _programs()
    drop = []
    if run_as:
        drop = [setpriv, f"--reuid={run_as['user']}", f"--regid={run_as['group']}", "--clear-groups",
                "--pdeathsig", "KILL"]
    return [setpriv, "--no-new-privs", "--pdeathsig", "KILL", *limits_prefix, *_namespaces(unshare), *drop,
            "/bin/sh", "-c", INIT, "job-init", target], {}


def returncode(code):
    """The command's own return code from unshare's: -N for a death by signal N (see INIT)."""
    return -(code - 128) if 128 < code < 128 + signal.NSIG else code


def kill(process):
    """SIGKILL the namespace's init (the kernel kills the rest) and wait for unshare to return, which
    it does once the namespace is empty. Killing unshare instead would return at once, with the
    command's processes dying moments later."""
    try:
        with open(f"/proc/{process.pid}/task/{process.pid}/children") as children:
            inits = [int(pid) for pid in children.read().split()]
    except OSError:  # gone already, or a kernel without CONFIG_PROC_CHILDREN: --kill-child does it
        inits = []
    for pid in inits:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


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
