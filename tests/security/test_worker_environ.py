"""A command running as the worker's own (non-root) user tries to read the worker's environment
through /proc/<pid>/environ: the worker and its pool processes are not dumpable, so it cannot."""

import os
import subprocess
import sys
import sysconfig

import pytest

from jobs import lifecycle
from jobs.definitions import save_job
from jobs.models import Job, JobRun
from jobs.permissions import COMMAND_RUNNERS_GROUP  # noqa: F401  (the group exists: migrations ran)

from ..conftest import REPO, wait_for

CANARY = "service-secret-6f1c2a"
USER, GROUP = "nobody", "nogroup"
# The command reads its parent's (the pool process's) environment and the worker's.
ATTACK = 'for pid in "$WORKER_PID" "$PPID"; do echo "pid $pid:"; tr "\\0" "\\n" < /proc/$pid/environ 2>&1; done; true'


def unprivileged_python():
    """An interpreter of this version that USER may run, and the path that finds our packages."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    path = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
    for candidate in (sys.executable, f"/usr/bin/python{version}"):
        try:
            probe = subprocess.run([candidate, "-c", "import django, celery, psycopg"], env={"PYTHONPATH": path},
                                   user=USER, group=GROUP, extra_groups=[], capture_output=True, timeout=60)
        except OSError:  # not executable for USER (a Python under /root)
            continue
        if probe.returncode == 0:
            return candidate, path
    return None, path


@pytest.fixture
def as_nobody():
    if os.geteuid() != 0:
        pytest.skip("starting a worker as another user needs root") if not os.environ.get("CI") else pytest.fail(
            "the tests must run as root to start a worker as an unprivileged user")
    python, path = unprivileged_python()
    if python is None:
        message = f"no Python {sys.version_info.major}.{sys.version_info.minor} that {USER} can run"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    return python, path


def run_attack(processes, python, path, undumpable):
    worker = processes.worker(concurrency=1, python=python, popen={"user": USER, "group": GROUP, "extra_groups": []},
                              PYTHONPATH=path, SECRET_KEY=CANARY, JOBS_WORKER_UNDUMPABLE=str(undumpable).lower())
    job = save_job(Job(name=f"peek-{undumpable}", kind="command", target=ATTACK,
                       environment={"WORKER_PID": str(worker.pid)}), {"type": "manual"})
    run = lifecycle.create_run(job)
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message="the command to run")
    run.refresh_from_db()
    assert run.status == "succeeded", (run.error, processes.logs())
    return run.output


def test_a_command_cannot_read_the_workers_environment(processes, as_nobody):
    python, path = as_nobody
    output = run_attack(processes, python, path, undumpable=True)
    assert CANARY not in output
    assert output.count("Permission denied") == 2, output


def test_the_attack_works_on_a_dumpable_worker(processes, as_nobody):
    """The control: the same command, the protection off, reads the secret (so the test above
    would see a leak)."""
    python, path = as_nobody
    output = run_attack(processes, python, path, undumpable=False)
    assert f"SECRET_KEY={CANARY}" in output

