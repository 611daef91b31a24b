"""A command running as the worker's own (non-root) user tries to read the worker's environment
through /proc/<pid>/environ. Two layers stop it: the command's PID namespace (it does not see the
worker at all), and, with isolation off, the worker and its pool processes not being dumpable."""

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from jobs import lifecycle
from jobs.actions.permissions import COMMAND_RUNNERS_GROUP  # noqa: F401  (the group exists: migrations ran)
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun

from ..conftest import REPO, require, wait_for

CANARY = "service-secret-6f1c2a"
USER, GROUP = "nobody", "nogroup"
# The command reads its parent's (the pool process's) environment and the worker's.
ATTACK = 'for pid in "$WORKER_PID" "$PPID"; do echo "pid $pid:"; tr "\\0" "\\n" < /proc/$pid/environ 2>&1; done; true'
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "var", "node_modules", "__pycache__", ".pytest_cache", "*.pyc")


def can_import(python, path, cwd):
    try:
        probe = subprocess.run([python, "-c", "import django, celery, psycopg, jobs"], env={"PYTHONPATH": path},
                               cwd=cwd, user=USER, group=GROUP, extra_groups=[], capture_output=True, timeout=60)
    except OSError:  # not executable for USER (a Python under /root, or in a private folder)
        return False
    return probe.returncode == 0


def readable_copy(folder):
    """The checkout's code and the venv's packages under ``folder``, where USER may read them: a
    clone in a private folder (mode 0700, as mktemp -d makes) or a venv under /root is out of its
    reach. Hard links where the file system allows them, copies elsewhere."""
    def link(source, target):
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    code, packages = folder / "checkout", folder / "site-packages"
    shutil.copytree(REPO, code, ignore=LEFT_OUT, symlinks=True)
    shutil.copytree(sysconfig.get_paths()["purelib"], packages, ignore=LEFT_OUT, copy_function=link, symlinks=True)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            with contextlib.suppress(OSError):  # a symbolic link to a file elsewhere
                path = os.path.join(root, name)
                os.chmod(path, os.stat(path).st_mode | 0o444)
    return code, os.pathsep.join([str(code), str(packages)])


@pytest.fixture(scope="module")
def as_nobody():
    """(interpreter, PYTHONPATH, working directory) with which USER runs a worker of this checkout:
    the checkout itself where USER can reach it, a readable copy (removed after) where not."""
    if os.geteuid() != 0:
        require(False, "starting a worker as another user needs root")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pythons = (sys.executable, f"/usr/bin/python{version}")
    path = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
    for python in pythons:
        if can_import(python, path, "/"):
            yield python, path, REPO
            return
    folder = Path(tempfile.mkdtemp(prefix="worker-as-nobody-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        code, path = readable_copy(folder)
        python = next((python for python in pythons if can_import(python, path, code)), None)
        require(python is not None, f"no Python {version} that {USER} can run (tried {', '.join(pythons)})")
        yield python, path, code
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_attack(processes, as_nobody, undumpable, isolation="off"):
    python, path, checkout = as_nobody
    worker = processes.worker(concurrency=1, python=python, PYTHONPATH=path, SECRET_KEY=CANARY,
                              popen={"user": USER, "group": GROUP, "extra_groups": [], "cwd": checkout},
                              JOBS_WORKER_UNDUMPABLE=str(undumpable).lower(), JOBS_COMMAND_ISOLATION=isolation,
                              JOBS_COMMAND_RUN_AS_SERVICE_USER="true")
    job = save_job(Job(name=f"peek-{undumpable}-{isolation}", kind="command", target=ATTACK,
                       environment={"WORKER_PID": str(worker.pid)}), {"type": "manual"})
    run = lifecycle.create_run(job)
    wait_for(lambda: JobRun.objects.get(pk=run.pk).is_terminal, timeout=60, message="the command to run")
    run.refresh_from_db()
    assert run.status == "succeeded", (run.error, processes.logs())
    return run.output


def test_a_command_cannot_read_the_workers_environment(processes, as_nobody):
    output = run_attack(processes, as_nobody, undumpable=True)
    assert CANARY not in output
    assert output.count("Permission denied") == 2, output


def test_the_attack_works_on_a_dumpable_worker(processes, as_nobody):
    """The control: the same command, the protection off, reads the secret (so the test above
    would see a leak)."""
    output = run_attack(processes, as_nobody, undumpable=False)
    assert f"SECRET_KEY={CANARY}" in output


def test_a_command_in_its_namespace_does_not_see_even_a_dumpable_worker(processes, as_nobody):
    """The worker runs as USER, not root: its commands get a user namespace of their own, with a PID
    namespace and /proc in it, where the worker and its pool process do not exist."""
    output = run_attack(processes, as_nobody, undumpable=False, isolation="namespace")
    assert CANARY not in output
    assert f"cannot open /proc/{worker_pid(output)}/environ: No such file" in output, output  # no worker in there
    # Its parent is its namespace's init, the zygote that forks the pool process's commands, which
    # runs as the same user here: not dumpable, its environment (where the commands' pass) is closed.
    assert "pid 1:" in output and "cannot open /proc/1/environ: Permission denied" in output, output



def worker_pid(output):
    return output.split()[1].rstrip(":")  # the command's first line: "pid <WORKER_PID>:"
