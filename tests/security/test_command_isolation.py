"""A run's processes are its own (DESIGN.md, guarantee 5), on a real worker: a command cannot see
another running command's processes nor read its secret environment through /proc, and what a
command leaves running (setsid, a double fork, nohup) is dead when its run ends."""

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from django.test import override_settings

from jobs import lifecycle
from jobs.access import secrets
from jobs.definitions.jobs import save_job
from jobs.kinds import command as command_kind
from jobs.kinds.base import JobTimedOut, RunContext
from jobs.kinds.command import isolation
from jobs.models import Job, JobRun, RunStatus

from ..conftest import require, wait_for

CANARY = "vault-token-4b1e9d"


@pytest.fixture
def shared_folder():
    """A folder every user may write to: commands run as JOBS_COMMAND_USER."""
    folder = Path(tempfile.mkdtemp(prefix="isolation-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def marker():
    """A word in the command lines of the processes a test starts; whatever is left of them is
    killed at the end, so a failing test leaves nothing behind."""
    word = f"isolation-{uuid.uuid4().hex[:12]}"
    yield word
    subprocess.run(["pkill", "-KILL", "-f", word])


def processes_named(word):
    return subprocess.run(["pgrep", "-f", word], capture_output=True, text=True).stdout.split()


def finished(run):
    return JobRun.objects.get(pk=run.pk).is_terminal


def test_a_command_cannot_see_another_running_command_nor_read_its_secret(processes, shared_folder, marker):
    done = shared_folder / "looked"
    holder = save_job(Job(
        name="holder", kind="command", timeout_seconds=60,
        target=f"echo holding > {shared_folder}/holding; while [ ! -e {done} ]; do sleep 0.1; done # {marker}",
        secret_environment=secrets.seal({"VAULT_TOKEN": CANARY}, {}, "secret_environment")))
    # Every process it can see, then every environment it can read.
    looker = save_job(Job(name="looker", kind="command", timeout_seconds=60, target=(
        f"ps -eo pid,args; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done; touch {done}")))
    processes.worker(concurrency=2)

    held = lifecycle.create_run(holder)
    wait_for(lambda: (shared_folder / "holding").exists(), timeout=60, message="the holder to run")
    looked = lifecycle.create_run(looker)
    wait_for(lambda: finished(looked) and finished(held), timeout=60, message="both commands to end")

    looked.refresh_from_db()
    assert looked.status == RunStatus.SUCCEEDED, looked.error
    assert "ps -eo pid,args" in looked.output  # it saw itself
    assert "JOB_RUN_ID=" in looked.output  # and read its own environment
    assert marker not in looked.output, looked.output  # but not the holder's processes
    assert CANARY not in looked.output, looked.output  # nor its secret
    assert JobRun.objects.get(pk=held.pk).status == RunStatus.SUCCEEDED


def test_what_a_command_leaves_running_dies_with_its_run(processes, marker):
    forever = "while :; do sleep 1; done"
    job = save_job(Job(name="leaves-things", kind="command", timeout_seconds=60, target=(
        f"setsid sh -c '{forever} # {marker} setsid' >/dev/null 2>&1 &\n"
        f"(sh -c '{forever} # {marker} double-fork' >/dev/null 2>&1 &)\n"
        f"nohup sh -c '{forever} # {marker} nohup' >/dev/null 2>&1 &\n"
        f"sleep 0.5; echo left {marker}")))
    processes.worker(concurrency=1)

    run = lifecycle.create_run(job)
    wait_for(lambda: finished(run), timeout=60, message="the run to end")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert f"left {marker}" in run.output
    assert processes_named(marker) == []


@override_settings(JOBS_KILL_GRACE_SECONDS=1)
def test_what_a_command_leaves_running_dies_with_it_at_its_timeout(marker):
    job = Job(name="outlives-its-timeout", kind="command", timeout_seconds=1, target=(
        f"setsid sh -c 'while :; do sleep 1; done # {marker}' >/dev/null 2>&1 &\n"
        f"trap '' TERM; sleep 30 # {marker}"))

    with pytest.raises(JobTimedOut):
        command_kind.execute(RunContext(run_id=1, attempt=1, job=job, timeout_seconds=1))

    assert processes_named(marker) == []


@pytest.mark.parametrize("setting", ["auto", "namespace"])
def test_a_worker_that_cannot_isolate_commands_says_so_at_start_and_fails_them(processes, setting):
    """Without util-linux's unshare (none on its PATH) the worker says at start that its
    commands will fail, and they do, saying why and naming the setting that runs them anyway: "auto"
    fails closed as "namespace" does."""
    worker = processes.worker(concurrency=1, PATH="/nonexistent", JOBS_COMMAND_ISOLATION=setting)
    job = save_job(Job(name=f"unisolated-{setting}", kind="command", target="echo ran"))

    run = lifecycle.create_run(job)
    wait_for(lambda: finished(run), timeout=60, message="the run to end")

    run.refresh_from_db()
    said = Path(worker.log_path).read_text()
    assert "COMMAND ISOLATION UNAVAILABLE (unshare (util-linux) not installed)" in said
    assert (run.status, run.output) == (RunStatus.FAILED, "")
    assert run.error == (f"Cannot isolate the command (JOBS_COMMAND_ISOLATION={setting}): unshare (util-linux) "
                         "not installed; set JOBS_COMMAND_ISOLATION=off to run commands without "
                         "isolation, knowing what is lost")


def test_commands_one_after_another_each_start_in_an_empty_namespace(processes, marker):
    """A pool process forks its commands from one zygote, the init of their namespace: what a
    command left running is killed before the next one starts, which sees no trace of it, neither
    its processes nor its secret."""
    first = save_job(Job(
        name="first", kind="command", timeout_seconds=60,
        target=f"setsid sh -c 'while :; do sleep 1; done # {marker}' >/dev/null 2>&1 &\necho left",
        secret_environment=secrets.seal({"VAULT_TOKEN": CANARY}, {}, "secret_environment")))
    second = save_job(Job(name="second", kind="command", timeout_seconds=60, target=(
        "ps -eo pid,args; echo ---; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done")))
    processes.worker(concurrency=1)

    runs = []
    for job in (first, second):
        runs.append(lifecycle.create_run(job))
        wait_for(lambda: finished(runs[-1]), timeout=60, message=f"{job.name} to end")
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED, run.error
    pids = {run.attempts.get().pid for run in runs}
    assert len(pids) == 1, f"the two ran in different pool processes {pids}: the test proves nothing"

    seen, environments = runs[1].output.split("---\n")
    rows = [line.split(None, 1) for line in seen.strip().splitlines()[1:]]
    assert rows[0][0] == "1" and "zygote.py" in rows[0][1], seen  # its namespace's init
    assert [args for _, args in rows[1:]] == [f"/bin/sh -c {second.target}", "ps -eo pid,args"], seen
    assert marker not in runs[1].output and CANARY not in environments
    assert "JOB_RUN_ID=" in environments  # it could read its own environment
    assert processes_named(marker) == []


@pytest.fixture(autouse=True)
def no_zygote_left():
    """The zygotes this process started for a test end with it."""
    yield
    isolation.close_idle()


def start_as_root(target, env=None):
    """The command as root in its namespace (as JOBS_COMMANDS_AS_ROOT=true would), from this
    process's zygote."""
    require(os.geteuid() == 0, "root, for commands run as root in their namespace")
    return isolation.start(target, {"PATH": "/usr/bin:/bin", **(env or {})}, None, 0o022, {}, {})


def ended(command):
    output = command.stdout.read().decode()
    command.stdout.close()
    return command.wait(timeout=30), output


def test_a_command_cannot_stop_its_namespaces_init():
    """Not even as root in the namespace: the kernel delivers to a namespace's init only the
    signals it handles, and the zygote ignores SIGINT. The next command starts from the same one."""
    code, output = ended(start_as_root(
        "for s in KILL TERM INT HUP QUIT USR1 USR2 ALRM PIPE; do kill -s $s 1; done; echo sent"))
    assert (code, output) == (0, "sent\n")
    code, output = ended(start_as_root("ps -o pid=,args= -p 1; echo $$"))
    assert code == 0 and "zygote.py" in output, output
    assert output.split()[-1] != "2", output  # not a new namespace: its shell is not the first process after init


def test_an_isolated_commands_exit_status_is_its_own():
    """Read from the command's shell itself: an exit status above 128 is not taken for a signal."""
    assert ended(start_as_root("exit 130"))[0] == 130
    assert ended(start_as_root("kill -TERM $$"))[0] == -15
    assert ended(start_as_root("echo out; echo err >&2; exit 3")) == (3, "out\nerr\n")


def test_two_commands_at_once_in_one_process_are_in_namespaces_of_their_own(marker, shared_folder):
    """A pool process running two commands at a time (a thread pool) gives each a zygote."""
    done = shared_folder / "looked"
    holder = start_as_root(f"while [ ! -e {done} ]; do sleep 0.1; done # {marker}", {"VAULT_TOKEN": CANARY})
    code, output = ended(start_as_root(
        f"ps -eo pid,args; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done; touch {done}"))
    assert ended(holder)[0] == 0
    assert code == 0 and "ps -eo pid,args" in output
    assert marker not in output and CANARY not in output, output


def test_a_zygote_that_died_while_idle_is_replaced():
    first = start_as_root("true")
    assert ended(first)[0] == 0
    first.zygote.process.kill()  # unshare: --kill-child takes the zygote with it
    first.zygote.process.wait(timeout=10)

    second = start_as_root("echo ran")
    assert ended(second) == (0, "ran\n")
    assert second.zygote is not first.zygote


def test_a_huge_environment_and_command_reach_the_command_whole_or_fail_saying_why():
    """The zygote's messages carry what execve takes (here 100 kB in a variable and in the command's
    text); past the kernel's limit for one string (128 kB) the start fails as Popen's would, and the
    next command starts."""
    big, text = "v" * 100_000, "#" + "c" * 100_000
    code, output = ended(start_as_root(f'printf %s "$BIG" | wc -c\n{text}', {"BIG": big}))
    assert (code, output.strip()) == (0, "100000")

    with pytest.raises(OSError, match="Argument list too long"):
        start_as_root("true", {"BIG": "v" * 1_000_000})
    assert ended(start_as_root("echo next")) == (0, "next\n")
