"""The processes a benchmark starts (Celery workers, beat, gunicorn): each in a session of its own,
its output in a log under /tmp, ended by its process group."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def celery(app, *args):
    """A celery command line, logging at BENCH_LOG_LEVEL (WARNING; INFO shows what beat dispatched, and when)."""
    return [sys.executable, "-m", "celery", "-A", app, *args, "-l", os.environ.get("BENCH_LOG_LEVEL", "WARNING")]


def worker(app, queue, concurrency=2, name=None):
    """A prefork worker of ``app`` on ``queue`` (``-n``: ``name``, else Celery's default)."""
    return celery(app, "worker", "-c", str(concurrency), "-P", "prefork", "-Q", queue,
                  *(["-n", name] if name else []), "--without-gossip", "--without-mingle")


def beat(schedule):
    """The service's scheduler; ``schedule``: the file of celery beat's own state."""
    return celery("scheduler_site", "beat", "--pidfile=", "-s", schedule)


def gunicorn(port, workers=2, threads=4):
    return [str(Path(sys.executable).parent / "gunicorn"), "scheduler_site.wsgi", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--threads", str(threads), "--no-control-socket"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Processes started here, by name; ``stop`` (or leaving the ``with``) ends each by its group:
    SIGTERM, then SIGKILL after ``grace`` seconds."""

    def __init__(self, tag=None):
        self.tag = tag or Path(sys.argv[0]).stem
        self.procs, self.logs = {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, name, argv, **env):
        """Start ``argv`` from the repository with this environment, PYTHONPATH the repository and ``env``."""
        log = f"/tmp/bench-{self.tag}-{name}-{os.getpid()}.log"
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(
                argv, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **env), start_new_session=True,
                stdout=out, stderr=subprocess.STDOUT)
        self.logs[name] = log
        return self.procs[name]

    def check(self):
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited; see {self.logs[name]}")

    def pids(self):
        return {name: proc.pid for name, proc in self.procs.items()}

    def error_lines(self):
        return [line for log in self.logs.values()
                for line in Path(log).read_text(errors="replace").splitlines() if "ERROR" in line]

    def stop(self, *names, first=signal.SIGTERM, grace=30):
        """End ``names`` (by default every process started here)."""
        procs = [self.procs[name] for name in names or self.procs]
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, first)
        for proc in procs:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_until(predicate, timeout, what, processes=None, step=0.05):
    """Poll ``predicate`` every ``step`` seconds until it holds; exit after ``timeout`` seconds, or
    as soon as one of ``processes`` has exited."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if processes:
            processes.check()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(step)


def end_on_sigterm():
    """SIGTERM unwinds like Ctrl-C: every process and server started in a ``with`` is ended."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
