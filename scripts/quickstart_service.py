"""The quick start's service in a copy of this checkout, as a newcomer runs it, apart from the checkout's
own var/: ``scripts/quickstart.sh`` starts web, worker, beat and Flower under honcho, on SQLite and a
Redis of its own, and a client of its REST API holds a token made as the README says. The quick start's
tests (tests/test_quickstart.py, test_sqlite_service.py, test_package.py) and the screenshots
(scripts/screenshots.py) use it."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent


def checkout_copy(target):
    """The checkout's files, committed or not (not what git ignores), copied into ``target``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    # The same interpreter and packages as the caller: the quick start keeps an existing .venv, and
    # its pip install finds everything there already.
    (target / ".venv").symlink_to(Path(sys.prefix))


def stop_redis(var):
    """The quick start's Redis is a daemon: stopped by its pid file."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((var / "redis.pid").read_text()), signal.SIGTERM)


def new_shell():
    """The environment of a new login shell: none of the service's variables."""
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}


def processes_in(folder):
    """The processes whose working directory is ``folder`` (honcho starts each in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "cwd")) == Path(folder) and int(entry.name) != os.getpid():
                    found.append(int(entry.name))
    return found


STOP_SECONDS = 20  # honcho's own grace for its children is 5 s


class QuickStartService:
    """The quick start in ``folder``/clone: web on ``web_port``, Flower and Redis on the next two."""

    def __init__(self, folder, web_port, **env):
        self.clone = Path(folder) / "clone"
        self.web_port, self.flower_port, self.redis_port = web_port, web_port + 1, web_port + 2
        self.url = f"http://127.0.0.1:{self.web_port}"
        self.env = {**new_shell(), "WEB_BIND": f"127.0.0.1:{self.web_port}", "FLOWER_PORT": str(self.flower_port),
                    "QUICKSTART_REDIS_PORT": str(self.redis_port), **env}
        self.process = None
        self.log_path = Path(folder) / "quickstart.log"
        self.session = requests.Session()

    def start(self, timeout=180):
        checkout_copy(self.clone)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(["bash", "scripts/quickstart.sh"], cwd=self.clone, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait(self.answers, timeout, f"the quick start's web at {self.url}")
        made = subprocess.run([".venv/bin/python", "manage.py", "tokens", "create", "admin"], cwd=self.clone,
                              env=self.env, capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            raise RuntimeError(f"manage.py tokens create admin: {made.stderr}")
        self.session.headers["Authorization"] = f"Token {made.stdout.strip().splitlines()[-1]}"

    def wait(self, check, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the quick start ended ({self.process.returncode}) before {what}:\n{self.log()}")
            found = check()
            if found:
                return found
            time.sleep(0.5)
        raise RuntimeError(f"gave up after {timeout} s waiting for {what}:\n{self.log()}")

    def answers(self):
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            return requests.get(f"{self.url}/api/", timeout=5).status_code == 401
        return False

    def api(self, method, path, expect=None, **kwargs):
        """``path`` under /api/; the answer's JSON, once its status is ``expect`` (None: any 2xx)."""
        response = self.session.request(method, f"{self.url}/api/{path}", timeout=30, **kwargs)
        if response.status_code != expect if expect else not response.ok:
            raise AssertionError((method, path, response.status_code, response.text[:2000]))
        return response.json()

    def admin_password(self):
        return (self.clone / "var" / "admin_password").read_text().strip()

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
