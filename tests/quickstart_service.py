"""The quick start's service, running: a copy of the checkout set up and started by
``scripts/quickstart.sh`` (web, worker, beat and Flower under honcho, on SQLite and a Redis of its own),
and a client of its REST API with a token made as the README says. No tests here."""

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import requests

from .conftest import wait_for
from .test_quickstart import checkout_copy, new_shell, stop_redis

STOP_SECONDS = 20  # honcho's own grace for its children is 5 s


class QuickStartService:
    def __init__(self, folder, port_base, **env):
        self.clone = Path(folder) / "clone"
        self.web_port, self.flower_port, self.redis_port = port_base + 480, port_base + 481, port_base + 482
        self.url = f"http://127.0.0.1:{self.web_port}"
        self.env = {**new_shell(), "WEB_BIND": f"127.0.0.1:{self.web_port}", "FLOWER_PORT": str(self.flower_port),
                    "QUICKSTART_REDIS_PORT": str(self.redis_port), **env}
        self.process = None
        self.log_path = Path(folder) / "quickstart.log"
        self.session = requests.Session()

    def start(self):
        checkout_copy(self.clone)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(["bash", "scripts/quickstart.sh"], cwd=self.clone, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self.answers, timeout=180, interval=0.5, message=f"the quick start's web at {self.url}")
        made = subprocess.run([".venv/bin/python", "manage.py", "tokens", "create", "admin"], cwd=self.clone,
                              env=self.env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        self.session.headers["Authorization"] = f"Token {made.stdout.strip().splitlines()[-1]}"

    def answers(self):
        assert self.process.poll() is None, f"the quick start ended:\n{self.log()}"
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            return requests.get(f"{self.url}/api/", timeout=5).status_code == 401
        return False

    def api(self, method, path, expect, **kwargs):
        response = self.session.request(method, f"{self.url}/api/{path}", timeout=30, **kwargs)
        assert response.status_code == expect, (response.status_code, response.text[:2000])
        return response.json()

    def log(self):
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self):
        """Ctrl-C's way (honcho stops its children), then whatever still runs in the copy, by its pid."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for pid in processes_in(self.clone):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stop_redis(self.clone / "var")


def processes_in(folder):
    """The processes whose working directory is ``folder`` (honcho starts each in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "cwd")) == Path(folder) and int(entry.name) != os.getpid():
                    found.append(int(entry.name))
    return found


def wait_for_run(service, run_id, statuses=("succeeded", "failed", "timed_out", "lost", "cancelled", "skipped"),
                 timeout=90):
    return wait_for(lambda: (run := service.api("GET", f"runs/{run_id}/", 200))["status"] in statuses and run,
                    timeout=timeout, interval=0.5, message=f"run {run_id} to end")
