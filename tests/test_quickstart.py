"""The README's first steps, as a newcomer takes them: the quick start's setup in a copy of the
checkout (`scripts/quickstart.sh --no-start`: everything but starting the four processes), then every
`manage.py` line of the shell blocks of the README and of the docs pages its first steps moved to,
each in a new shell: an environment with none of the service's variables, only what a login shell has."""

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from scripts.quickstart_service import checkout_copy, new_shell, stop_redis

from .conftest import REPO

# The README and the pages of the docs site whose `manage.py` lines work right after the quick start.
PAGES = ("README.md", "docs/tutorial/quickstart.md", "docs/guide/command-line.md", "docs/reference/jobs-as-code.md")
# What the pages' placeholders stand for here: a job and its finished run, made after the setup, and a
# crontab to import.
PLACEHOLDERS = {"NAME": "hello", "RUN": "1", "USER": "admin", "FILE": "var/crontab"}
# Lines that need a long-running process the setup does not start (a worker runs the job).
NEEDS_A_WORKER = ("--wait",)


def readme_manage_blocks():
    """The pages' ``manage.py`` lines, block by block (a block's lines may depend on each other:
    export, then apply), their placeholders filled in."""
    blocks = []
    text = "\n".join((REPO / page).read_text() for page in PAGES)
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines = [re.sub(r"\b(NAME|RUN|USER|FILE)\b", lambda m: PLACEHOLDERS[m.group(1)], line.split("  #")[0].strip())
                 for line in block.splitlines() if line.startswith(".venv/bin/python manage.py ")]
        if lines and lines not in blocks:  # the README repeats the quick start page's first block
            blocks.append(lines)
    return blocks


def modes(folder):
    return {".": folder.stat().st_mode & 0o777,
            **{name: (folder / name).stat().st_mode & 0o777 for name in os.listdir(folder)}}


def run(args, cwd, **extra):
    return subprocess.run(args, cwd=cwd, env={**new_shell(), **extra}, capture_output=True, text=True, timeout=300)


@pytest.mark.postgres("runs the quick start's own SQLite database, not the test database: once is enough")
def test_the_readmes_manage_py_commands_work_in_a_new_shell_after_the_quick_start(tmp_path, request):
    clone = tmp_path / "clone"
    checkout_copy(clone)

    redis_port = int(os.environ.get("TEST_PORT_BASE", "16000")) + 379
    request.addfinalizer(lambda: stop_redis(clone / "var"))
    setup = run(["bash", "scripts/quickstart.sh", "--no-start"], clone, WEB_BIND="0.0.0.0:8123", FLOWER_PORT="5601",
                QUICKSTART_REDIS_PORT=str(redis_port))
    assert setup.returncode == 0, setup.stdout + setup.stderr
    # The banner names where the processes listen (WEB_BIND, FLOWER_PORT), not the defaults.
    assert "http://127.0.0.1:8123/admin/" in setup.stdout and "http://127.0.0.1:5601/" in setup.stdout
    assert ":8000" not in setup.stdout and ":5555" not in setup.stdout
    assert (clone / "var" / "secret_key").stat().st_mode & 0o777 == 0o600
    # var/ and everything in it (the database made by migrate, the keys, Redis's password) are the
    # service's user's alone.
    assert modes(clone / "var") == {".": 0o700, **{name: 0o600 for name in os.listdir(clone / "var")}}
    assert {"scheduler.sqlite3", "secrets_key", "redis.conf", "redis_url"} <= set(os.listdir(clone / "var"))
    # Its Redis listens on 127.0.0.1 only and answers no one without the password kept in var/.
    url = (clone / "var" / "redis_url").read_text().strip()
    password = url.split("//:")[1].split("@")[0]
    assert len(password) >= 32 and f"requirepass {password}" in (clone / "var" / "redis.conf").read_text()
    assert url == f"redis://:{password}@127.0.0.1:{redis_port}/0"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=redis_port, socket_timeout=5).ping()
    assert redis.Redis(port=redis_port, password=password, socket_timeout=5).ping()
    assert redis.Redis(port=redis_port, password=password).config_get("bind") == {"bind": "127.0.0.1"}
    # manage.py in a new shell reaches it through the settings (var/redis_url).
    broker = run([".venv/bin/python", "manage.py", "shell", "-c",
                  "from django.conf import settings; print(settings.CELERY_BROKER_URL)"], clone)
    assert broker.stdout.strip().splitlines()[-1] == url, broker.stderr
    made = run([".venv/bin/python", "manage.py", "shell", "-c",
                "from jobs.definitions.jobs import save_job; from jobs.models import Job; from jobs import lifecycle;"
                "run = lifecycle.create_run(save_job(Job(name='hello', kind='callable', target='builtin.noop'),"
                " {'type': 'manual'})); lifecycle.claim(run.pk, 1, 'worker', 1);"
                " lifecycle.record_success(run.pk, 1, output='hello')"], clone)
    assert made.returncode == 0, made.stderr
    (clone / "var" / "crontab").write_text("@daily /bin/true\n")

    blocks = readme_manage_blocks()
    commands = [command for block in blocks for command in block]
    assert ".venv/bin/python manage.py tokens create admin" in commands
    assert ".venv/bin/python manage.py jobs list" in commands

    def run_block(block):
        failed = []
        for command in block:
            if any(flag in command for flag in NEEDS_A_WORKER):
                continue
            result = run(["bash", "-c", command], clone)
            if result.returncode != 0:
                failed.append(f"{command}: exit {result.returncode}\n{result.stderr[-2000:]}")
        return failed

    # The blocks side by side (SQLite in WAL mode with a busy timeout, as the service runs it).
    with ThreadPoolExecutor(len(blocks)) as pool:
        failures = [failure for failed in pool.map(run_block, blocks) for failure in failed]
    assert not failures, "\n\n".join(failures)


def test_without_a_key_and_without_the_quick_starts_file_the_service_refuses_to_start(tmp_path):
    result = run([sys.executable, "-c", "import django; django.setup()"], REPO, VAR_DIR=str(tmp_path),
                 DJANGO_SETTINGS_MODULE="scheduler_site.settings", PYTHONPATH=str(REPO))
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_it_refuses_a_key_file_other_users_may_read(tmp_path):
    (tmp_path / "secret_key").write_text("a-key-from-the-quick-start")
    (tmp_path / "secret_key").chmod(0o644)
    result = run([sys.executable, "-c", "import django; django.setup()"], REPO, VAR_DIR=str(tmp_path),
                 DJANGO_SETTINGS_MODULE="scheduler_site.settings", PYTHONPATH=str(REPO))
    assert result.returncode != 0
    assert "secret_key may be read by other users: chmod 600 it" in result.stderr
