"""A live service for the command line's tests: jobsctl installed from jobsctl/pyproject.toml into a folder
of its own (as a laptop would install it), a real gunicorn web process on a port of this session's
range, and jobsctl run as a subprocess. No tests here."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from .conftest import REPO, database_url

PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "6390")) + 100
CLI_TIMEOUT = 120  # seconds a single jobsctl call may take before the test fails


def free_port(start=PORT_BASE):
    for port in range(start, start + 100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port for the web process")


def install_cli(target):
    """``pip install ./jobsctl`` (its own distribution) into ``target``: the console script lands in target/bin.
    From a copy: setuptools builds in the source folder, and passes side by side would share it."""
    source = Path(f"{target}-source")
    shutil.copytree(REPO / "jobsctl", source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), str(source)], check=True, timeout=120)
    script = Path(target) / "bin" / "jobsctl"
    assert script.is_file(), "pip install . did not install the jobsctl console script"
    return script


class Web:
    """gunicorn serving the project against the test database, killed (by process group) at the end."""

    def __init__(self, log_dir, port=None, **env):
        """``port``: by default a spare one from PORT_BASE; ``env``: more variables for the service."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / "gunicorn.log"
        env = {**os.environ, "DATABASE_URL": database_url(), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
               "PYTHONPATH": str(REPO), "DB_CONN_MAX_AGE": "0", **env}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "scheduler_site.wsgi", "-b", f"127.0.0.1:{self.port}",
                 "--workers", "2", "--timeout", "60", "--no-control-socket"],  # as gunicorn_conf
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_until_up(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"gunicorn exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        pytest.fail(f"gunicorn did not listen on {self.port} within {timeout}s")

    def stop(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


class Cli:
    """Runs the installed jobsctl with a home of its own (no user config) and the given token."""

    def __init__(self, script, url, home):
        self.script, self.url, self.home = script, url, home

    def env(self, token=None, **extra):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "PYTHONPATH": str(self.script.parent.parent), "JOBSCTL_URL": self.url, "LANG": "C.UTF-8"}
        if token:
            env["JOBSCTL_TOKEN"] = token
        env.update({key: str(value) for key, value in extra.items()})
        return {key: value for key, value in env.items() if value != ""}

    def start(self, *args, token=None, **env):
        """jobsctl as a running process, its stdout and stderr piped (text)."""
        return subprocess.Popen([str(self.script), *map(str, args)], env=self.env(token, **env), cwd=self.home,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_ctrl_c_as_at_a_terminal)

    def __call__(self, *args, token=None, stdin=None, timeout=CLI_TIMEOUT, **env):
        result = subprocess.run([str(self.script), *map(str, args)], env=self.env(token, **env), cwd=self.home,
                                input=stdin, capture_output=True, text=True, timeout=timeout)
        assert "Traceback" not in result.stderr, result.stderr
        return result


def _ctrl_c_as_at_a_terminal():
    # A suite started in the background by a shell without job control (nohup, "cmd &" in a script)
    # inherits SIGINT ignored, and Python then leaves it ignored: a test's Ctrl-C would do nothing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
