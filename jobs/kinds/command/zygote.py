"""The init (PID 1) of a PID and mount namespace that runs a pool process's commands, one at a time:
forking from here costs a fraction of starting setpriv, prlimit, unshare, setpriv, a shell and env
for each command (``isolation``, "Costs").

A stand-alone program (the standard library only, ``python -I -S``) started once per pool process
through ``unshare --pid --fork --mount-proc --kill-child``, with a clean environment. It talks to
its pool process over one stream socket (its fd is the argument), each message a length and JSON, the command's
output pipe passed along with ``start``:

- ``{"start": {argv, env, cwd, umask, uid, gid, rlimits}}`` + the pipe's write end: forks the
  command (a session of its own, stdin /dev/null, stdout and stderr the pipe, the limits, the
  directory, the user, default signal dispositions) and answers ``{"started": true}``, or
  ``{"error": [errno, strerror]}`` when it could not be started (a missing directory);
- ``{"signal": N}``: N to the command's process group;
- ``{"kill": true}``: SIGKILL to every process of the namespace.

When the command's shell ends, every process left in the namespace (``setsid``, a double fork,
``nohup``) is killed and reaped, and only then is ``{"exit": code}`` sent (Popen's return code:
-N for a death by signal N). So the next command starts in an empty namespace, as if it were new.

When the socket closes (the pool process ended, or was killed), this process exits at once, and
the kernel kills everything in its namespace: nothing outlives the worker.

It is not dumpable: a command running as the same user (a worker that is not root) can neither
trace it nor read its memory or ``/proc/1/environ``, where the commands' environments pass. The
kernel delivers to a namespace's init only the signals it handles, and SIGINT is ignored here, so
a command cannot stop it either.
"""

import contextlib
import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGCHLD)


def frame(message):
    data = json.dumps(message).encode()
    return HEADER.pack(len(data)) + data


def send(sock, message, fds=()):
    data = frame(message)
    sent = socket.send_fds(sock, [data], list(fds)) if fds else 0
    sock.sendall(data[sent:])


def receive(sock):
    """(the next message, the fds passed with it), or (None, []) at the end of the stream."""
    head, fds, _, _ = socket.recv_fds(sock, HEADER.size, 1)
    if not head:
        return None, fds
    head += _exactly(sock, HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    return json.loads(_exactly(sock, size)), fds


def _exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def start(request, output):
    """Fork the command; (its pid, None) or (None, (errno, strerror)) when it cannot be started."""
    failed_r, failed_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            _become_the_command(request, output, failed_w)
        except OSError as exc:
            os.write(failed_w, json.dumps([exc.errno, exc.strerror]).encode())
        except BaseException as exc:  # a limit above the hard one, as a user that may not raise it
            os.write(failed_w, json.dumps([errno.EPERM, str(exc)]).encode())
        finally:
            os._exit(127)
    os.close(failed_w)
    with os.fdopen(failed_r, "rb") as failed:
        reason = failed.read()
    if reason:
        os.waitpid(pid, 0)
        return None, json.loads(reason)
    return pid, None


def _become_the_command(request, output, failed_w):
    os.setsid()
    for signum in DEFAULT_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.closerange(3, failed_w)
    os.closerange(failed_w + 1, 65536)
    for name, (soft, hard) in request["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    os.umask(request["umask"])
    if request["cwd"]:
        os.chdir(request["cwd"])
    if request["uid"] is not None:
        os.setgroups([])
        os.setresgid(request["gid"], request["gid"], request["gid"])
        os.setresuid(request["uid"], request["uid"], request["uid"])
    os.execve(request["argv"][0], request["argv"], request["env"])


def sweep():
    """SIGKILL every other process of the namespace, and reap them all."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class Init:
    def __init__(self, sock):
        self.sock, self.command = sock, None

    def obey(self, message, fds):
        if "start" in message:
            pid, error = start(message["start"], fds[0])
            for fd in fds:
                os.close(fd)
            self.command = pid
            send(self.sock, {"error": error} if error else {"started": True})
        elif "signal" in message and self.command is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.command, message["signal"])
        elif "kill" in message:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)

    def reap(self):
        """Reap the ended children: the command (then the rest, and say how it ended) and the
        orphans a namespace's init inherits."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.command:
                self.command = None
                sweep()
                send(self.sock, {"exit": os.waitstatus_to_exitcode(status)})


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    woken_r, woken_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(woken_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    init = Init(socket.socket(fileno=int(sys.argv[1])))
    while True:
        readable, _, _ = select.select([init.sock, woken_r], [], [])
        if init.sock in readable:
            try:
                message, fds = receive(init.sock)
            except (EOFError, OSError):
                message, fds = None, []
            if message is None:
                os._exit(0)  # the pool process is gone: the kernel kills the namespace with us
            init.obey(message, fds)
        if woken_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(woken_r, 512):
                    pass
        init.reap()


if __name__ == "__main__":
    sys.exit(main())
