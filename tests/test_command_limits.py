"""Resource limits of command jobs (memory, CPU time, open files, processes, working directory),
and commands never running as root unless allowed."""

import os
import pwd
import subprocess

import pytest
from django.test import override_settings

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.kinds import command as command_kind
from jobs.kinds.base import JobFailed, RunContext
from jobs.models import Job, RunStatus

from .api_personas import make_personas
from .conftest import require, wait_for

as_root_only = pytest.mark.usefixtures("running_as_root")


@pytest.fixture
def running_as_root():
    require(os.geteuid() == 0, "the worker drops root only when it runs as root")


ALLOCATE = "python3 -c 'import sys; data = bytearray({mb} * 1024 * 1024); print(\"allocated\", len(data) >> 20, \"MB\")'"


def execute(target, **fields):
    job = Job(name="limited", kind="command", target=target, **fields)
    return command_kind.execute(RunContext(run_id=1, attempt=1, job=job, timeout_seconds=20))


def failure_of(target, **fields):
    with pytest.raises(JobFailed) as caught:
        execute(target, **fields)
    return caught.value


@as_root_only
def test_a_command_runs_as_the_command_user_not_root():
    assert execute("id -un").output.strip() == "nobody"


@as_root_only
@override_settings(JOBS_COMMANDS_AS_ROOT=True)
def test_a_command_runs_as_root_only_when_a_setting_allows_it():
    assert execute("id -un").output.strip() == "root"


@as_root_only
@override_settings(JOBS_COMMAND_USER="no-such-user-here")
def test_an_unknown_command_user_fails_the_run_clearly():
    assert "JOBS_COMMAND_USER 'no-such-user-here' does not exist" in str(failure_of("true"))


def test_the_limits_apply_to_the_command_and_what_it_starts():
    soft_limits = ("python3 -c 'import resource as r; print(*(r.getrlimit(getattr(r, name))[0] for name in "
                   "(\"RLIMIT_AS\", \"RLIMIT_CPU\", \"RLIMIT_NOFILE\", \"RLIMIT_NPROC\")))'")
    # The limits hold for whatever the command runs (here python3, started through the shell).
    outcome = execute(soft_limits, memory_limit_mb=256, cpu_limit_seconds=30, max_open_files=64, max_processes=50)
    assert outcome.output.split() == [str(256 * 1024 * 1024), "30", "64", "50"]


def test_a_command_past_its_memory_limit_fails_with_that_reason():
    failed = failure_of(ALLOCATE.format(mb=512), memory_limit_mb=64)
    assert str(failed) == "Command failed: exceeded its memory limit of 64 MB (exit code 1)"
    assert "MemoryError" in failed.output
    assert execute(ALLOCATE.format(mb=16), memory_limit_mb=64).output.strip() == "allocated 16 MB"


def test_a_command_past_its_cpu_limit_fails_with_that_reason():
    failed = failure_of("while :; do :; done", cpu_limit_seconds=1)
    assert str(failed) == "Command failed: exceeded its CPU-time limit of 1 s (killed by signal 24)"


def test_a_command_past_its_open_files_limit_cannot_open_more():
    failed = failure_of("python3 -c 'fs = [open(\"/dev/null\") for _ in range(100)]'", max_open_files=16)
    assert "Too many open files" in failed.output


def test_a_command_runs_in_its_working_directory(tmp_path):
    os.chmod(tmp_path, 0o755)
    assert execute("pwd", working_directory=str(tmp_path)).output.strip() == str(tmp_path)
    missing = failure_of("pwd", working_directory=str(tmp_path / "gone"))
    assert str(missing) == f"Cannot start the command in {tmp_path / 'gone'}: No such file or directory"


@pytest.mark.django_db
def test_the_api_checks_the_limits_field_by_field():
    people = make_personas()
    client = people.client(people.runner)
    body = {"name": "limited", "kind": "command", "target": "true"}
    response = client.post("/api/jobs/", {**body, "memory_limit_mb": 1, "max_processes": 0}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"memory_limit_mb", "max_processes"}
    response = client.post("/api/jobs/", {**body, "working_directory": "relative/dir"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"working_directory": ["Must be an absolute path, such as /srv/reports."]}


def processes_of(user):
    return subprocess.run(["pgrep", "-u", user], capture_output=True, text=True).stdout.split()


BOMB_USER = "scheduler-bomb-test"


@pytest.fixture
def bomb_user():
    """A user of the fork bomb's own: the process limit counts every process of a user, and the other
    test passes run commands as nobody at the same time."""
    try:
        pwd.getpwnam(BOMB_USER)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", BOMB_USER],
                       check=True)
        created = True
    yield BOMB_USER
    subprocess.run(["pkill", "-KILL", "-u", BOMB_USER])
    if created:
        subprocess.run(["userdel", BOMB_USER], check=True)


def command_job(name, target, **fields):
    fields.setdefault("timeout_seconds", 30)
    return save_job(Job(name=name, kind="command", target=target, **fields))


def finished(run):
    run.refresh_from_db()
    return run.is_terminal


def test_a_worker_survives_a_command_past_its_memory_limit_and_runs_the_next(processes):
    hog = command_job("hog", ALLOCATE.format(mb=1024), memory_limit_mb=64)
    modest = command_job("modest", ALLOCATE.format(mb=16), memory_limit_mb=64)
    processes.worker(concurrency=1)

    first = lifecycle.create_run(hog)
    wait_for(lambda: finished(first), timeout=60, message="the memory hog to finish")
    second = lifecycle.create_run(modest)
    wait_for(lambda: finished(second), timeout=60, message="the next run to finish")

    assert first.status == RunStatus.FAILED
    assert first.error == "Command failed: exceeded its memory limit of 64 MB (exit code 1)"
    assert second.status == RunStatus.SUCCEEDED
    assert second.output.strip() == "allocated 16 MB"
    assert first.attempts.get().pid == second.attempts.get().pid  # the same pool process


@as_root_only
def test_a_fork_bomb_is_contained_by_the_process_limit(processes, bomb_user):
    assert processes_of(bomb_user) == [], f"processes of {bomb_user} left over from elsewhere"
    bomb = command_job("fork-bomb", "bomb() { bomb | bomb & }; bomb; sleep 2; echo still here", max_processes=20,
                       timeout_seconds=20)
    after = command_job("after-the-bomb", "echo fine")
    processes.worker(concurrency=1, JOBS_COMMAND_USER=bomb_user)

    run = lifecycle.create_run(bomb)
    wait_for(lambda: finished(run), timeout=60, message="the fork bomb's run to end")
    next_run = lifecycle.create_run(after)
    wait_for(lambda: finished(next_run), timeout=60, message="the next run to finish")

    assert "Cannot fork" in run.output  # forks past the limit were refused
    # The shell ends on its own, long before its timeout: it carries on and exits 0, or (sh is dash) exits 2
    # when the fork of its own `sleep` is refused too, which is fatal to dash; which one is a race.
    assert run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED), run.error
    assert "still here" in run.output if run.status == RunStatus.SUCCEEDED else "exit code 2" in run.error
    assert processes_of(bomb_user) == []  # the process group was killed when the run ended
    assert next_run.status == RunStatus.SUCCEEDED and next_run.output.strip() == "fine"
