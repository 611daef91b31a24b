"""``scheduler``, the installed service's command (``pip install .``; ``python -m scheduler_site`` is the
same): the Procfile's processes, a first setup, and every ``manage.py`` command.

    scheduler setup                 # var/ and its keys, migrate, collectstatic, the admin user
    scheduler start                 # web, worker and beat together, until Ctrl-C
    scheduler web | worker | beat   # one of them (WEB_BIND, WORKER_CONCURRENCY, JOBS_DEFAULT_QUEUE)
    scheduler jobs list             # any other word: manage.py's command of that name

It runs in a folder of the operator's choosing: var/ (or VAR_DIR) and staticfiles/ are made there
(scheduler_site.env.home_dir). docs/how-to/installed-service.md.
"""

import os
import secrets
import shlex
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from .env import var_dir

# The keys ``setup`` makes once in var/ (the quick start's scripts/quickstart.sh makes the same files).
KEYS = {
    "secret_key": lambda: secrets.token_urlsafe(50),
    "admin_password": lambda: secrets.token_urlsafe(12),
    "secrets_key": lambda: Fernet.generate_key().decode(),
    "metrics_token": lambda: secrets.token_urlsafe(24),
}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    command = argv[0] if argv else "--help"
    if command in ("-h", "--help"):
        print(__doc__)
        return manage(["help"])
    if command in PROCESSES:
        return PROCESSES[command](argv[1:])
    if command == "setup":
        return setup()
    if command == "start":
        return start()
    return manage(argv)


def manage(argv, prog="scheduler"):
    """A ``manage.py`` command (manage.py itself calls this, as ``prog``)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    from scheduler_site import process

    process.harden()  # before anything is written (migrate makes the SQLite database) or read
    from django.core.management import execute_from_command_line

    execute_from_command_line([prog, *argv])
    return 0


def web_argv(extra):
    return [sys.executable, "-m", "gunicorn", "scheduler_site.wsgi", "--config", "python:scheduler_site.gunicorn_conf",
            "--bind", os.environ.get("WEB_BIND", "127.0.0.1:8000"), "--workers", "2", "--threads", "4",
            "--access-logfile", "-", *extra]


def worker_argv(extra):
    return [sys.executable, "-m", "celery", "-A", "scheduler_site", "worker", "-l", "INFO",
            "-Q", os.environ.get("JOBS_DEFAULT_QUEUE", "jobs"), "-c", os.environ.get("WORKER_CONCURRENCY", "2"),
            "--without-gossip", "--without-mingle", *extra]


def beat_argv(extra):
    return [sys.executable, "-m", "celery", "-A", "scheduler_site", "beat", "-l", "INFO", *extra]


def run_as(argv_of):
    def run(extra):
        argv = argv_of(extra)
        os.execv(argv[0], argv)

    return run


PROCESSES = {"web": run_as(web_argv), "worker": run_as(worker_argv), "beat": run_as(beat_argv)}


def setup():
    """What scripts/quickstart.sh does after installing, for the installed service: var/ (0700) with its
    keys (0600, made once), migrate, collectstatic, and the admin user (ADMIN_USER, default admin) with
    the password kept in var/admin_password."""
    var = var_dir(Path(__file__).resolve().parent.parent)
    old_umask = os.umask(0o077)
    try:
        var.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, make in KEYS.items():
            path = var / name
            if not path.is_file() or not path.read_text().strip():
                path.write_text(make() + "\n")
            path.chmod(0o600)
    finally:
        os.umask(old_umask)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    name = os.environ.get("ADMIN_USER", "admin")
    password = os.environ.get("ADMIN_PASSWORD") or (var / "admin_password").read_text().strip()
    user, created = get_user_model().objects.get_or_create(username=name,
                                                           defaults={"is_staff": True, "is_superuser": True})
    if created:
        user.set_password(password)
        user.save()
    print(f"Set up in {var.parent}: the admin is {name!r}" + (f", password in {var / 'admin_password'}"
                                                              if created and "ADMIN_PASSWORD" not in os.environ else ""))
    print("Next: scheduler start (web, worker and beat; a Redis at REDIS_URL, or 127.0.0.1:6379)")
    return 0


def start():
    """web, worker and beat under honcho, as the quick start runs the Procfile."""
    from honcho.manager import Manager

    manager = Manager()
    for name, argv_of in (("web", web_argv), ("worker", worker_argv), ("beat", beat_argv)):
        manager.add_process(name, shlex.join(argv_of([])), env=dict(os.environ))
    manager.loop()
    return manager.returncode
