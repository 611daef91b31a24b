"""What every service process does first (web, worker, beat, Flower, manage.py): what it writes is
its user's alone, and no other process of that user (a command included) may read its memory or
its environment.

- umask 077: the SQLite database (made by ``migrate``), its journal files, keys and whatever else
  the service writes are 0600, its folders 0700.
- Not dumpable (prctl(2), PR_SET_DUMPABLE): the process's /proc files (environ, mem...) belong to
  root and ptrace is refused to anyone without CAP_SYS_PTRACE, so a process of the same user cannot
  read DATABASE_URL, SECRET_KEY or JOBS_SECRETS_KEYS there. It survives fork (gunicorn's and the
  prefork pool's children) and is reset by execve, so the programs the service starts (commands)
  are ordinary processes.
- ``var/`` (the quick start's folder) is 0700, and the database files in it 0600, even when an
  earlier version left them readable.
"""

import contextlib
import os
from pathlib import Path

from jobs.worker.hardening import make_undumpable

UMASK = 0o077


def harden():
    """The first thing of every service process. JOBS_WORKER_UNDUMPABLE=false (read from the
    environment: gunicorn's master runs this before Django's settings) leaves them dumpable, to
    attach a debugger or profiler."""
    os.umask(UMASK)
    if os.environ.get("JOBS_WORKER_UNDUMPABLE", "true").strip().lower() not in ("0", "false", "no", "off"):
        make_undumpable()


def secure_var_dir(var_dir):
    """``var_dir`` 0700 and the files in it 0600, those that are this user's (called once the
    settings have read the keys there: a key file others could read is refused, not mended)."""
    folder = Path(var_dir)
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in (folder, *folder.iterdir()):
        with contextlib.suppress(OSError):  # gone meanwhile
            stat = path.lstat()
            if stat.st_uid == os.geteuid() and (path == folder or path.is_file() and not path.is_symlink()):
                path.chmod(0o700 if path == folder else 0o600)
