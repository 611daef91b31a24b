"""A copy of this checkout where the quick start can run as a newcomer runs it, apart from the
checkout's own var/: the quick start's test (tests/test_quickstart.py) and the screenshots
(scripts/screenshots.py) use it."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

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
