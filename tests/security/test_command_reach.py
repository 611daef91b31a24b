"""A member of a team who holds the command permission runs commands, through the API and a real
worker, that try to read the service: the quick start's var/ (the SQLite database, the keys), the
service processes' /proc/<pid>/environ (worker, beat, web, Flower), and the worker's variables
(the cloud's credentials, the database's password, the exporters' headers). Each read fails, on a
root worker and on one that is not root; the commands' own guards are checked here too: the
environment is an allow-list, no new privileges, default rlimits, isolation that fails closed."""

import grp
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from jobs.kinds import command as command_kind
from jobs.kinds.base import JobFailed, RunContext
from jobs.kinds.command import isolation
from jobs.models import Job, JobRun, RunStatus

from ..conftest import REPO, require, wait_for
from .test_worker_environ import GROUP, USER
from .test_worker_environ import as_nobody as as_nobody  # a fixture

pytestmark = pytest.mark.postgres("starts workers, beat, web and Flower")

PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "6390"))
FLOWER_CREDENTIALS = "ops:correct-horse-battery"
# What the service holds: in its processes' environment, in var/ and in its database.
SERVICE_ENV = {
    "SECRET_KEY": "service-secret-key-5d1e",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-9c2f",
    "PGPASSWORD": "pg-password-7b3a",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=otel-token-1e8d",
    "SENTRY_AUTH_TOKEN": "sentry-token-4a6c",
    "FLOWER_BASIC_AUTH": FLOWER_CREDENTIALS,
}
IN_VAR = {"secret_key": "var-secret-key-8f0b", "secrets_key": "var-fernet-key-2d7e"}
IN_DATABASE = "session-key-of-staff-3c9a"
CANARIES = [*SERVICE_ENV.values(), *IN_VAR.values(), IN_DATABASE]
ATTACK = r"""echo "user: $(id -un)"
for f in "$VAR/scheduler.sqlite3" "$VAR/secrets_key" "$VAR/secret_key"; do
  echo "== $f"; { tr -c '[:print:]\n' '.' < "$f"; } 2>&1 | head -c 100000; echo
done
echo "== ls"; ls -l "$VAR" 2>&1
for pid in $PIDS; do echo "== environ $pid"; { tr '\0' '\n' < /proc/$pid/environ; } 2>&1; done
echo "== env"; env
true"""


@pytest.fixture
def layout():
    """A quick start's checkout as an earlier version left it: var/ 0755, its SQLite database 0644
    (migrate's umask), the keys 0600. The folder above it may be crossed by anyone, as a home's is."""
    top = Path(tempfile.mkdtemp(prefix="command-reach-", dir="/tmp"))
    top.chmod(0o755)
    var = top / "var"
    var.mkdir()
    var.chmod(0o755)
    for name, value in IN_VAR.items():
        (var / name).write_text(value)
        (var / name).chmod(0o600)
    with sqlite3.connect(var / "scheduler.sqlite3") as db:
        db.execute("create table django_session (session_key text)")
        db.execute("insert into django_session values (?)", (IN_DATABASE,))
    (var / "scheduler.sqlite3").chmod(0o644)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def owned_by(folder, user):
    uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(GROUP).gr_gid
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, uid, gid)


def attack(people, pids, var):
    """The runner (team "team", in "Command job runners") makes the command job and runs it now,
    through the API; the run as the worker ended it."""
    api = people.api(people.runner)
    made = api.post("/api/jobs/", {"name": "reach", "kind": "command", "target": ATTACK, "environment": {
        "VAR": str(var), "PIDS": " ".join(str(pid) for pid in pids)}}, format="json")
    assert made.status_code == 201, made.content
    started = api.post(f"/api/jobs/{made.json()['id']}/run/", {}, format="json")
    assert started.status_code == 202, started.content
    run_id = started.json()["id"]
    wait_for(lambda: JobRun.objects.get(pk=run_id).is_terminal, timeout=90, message="the command to run")
    return JobRun.objects.get(pk=run_id)


def logged(proc, words, message):
    wait_for(lambda: words in Path(proc.log_path).read_text(errors="replace"), timeout=90, message=message)


def web(processes, port, **kwargs):
    return processes.start("web", [kwargs.pop("python", sys.executable), "-m", "gunicorn", "scheduler_site.wsgi",
                                   "-b", f"127.0.0.1:{port}", "--workers", "1"], **kwargs)


def flower(processes, port, **kwargs):
    return processes.start("flower", [kwargs.pop("python", sys.executable), "-m", "scheduler_site.flower",
                                      "--address=127.0.0.1", f"--port={port}"], **kwargs)


def assert_nothing_leaked(output):
    leaked = [canary for canary in CANARIES if canary in output]
    assert not leaked, output


def test_on_a_root_worker_a_command_reads_nothing_of_the_service(processes, people, layout):
    var = layout / "var"
    env = {**SERVICE_ENV, "VAR_DIR": str(var)}
    worker = processes.worker(concurrency=1, **env)
    beat = processes.beat(**env)
    server = web(processes, PORT_BASE + 81, **env)
    logged(worker, "ready.", "the worker to start")
    logged(server, "Booting worker", "the web server to start")

    run = attack(people, [worker.pid, beat.pid, server.pid], var)

    assert run.status == RunStatus.SUCCEEDED, (run.error, processes.logs())
    output = run.output
    assert "user: nobody" in output and "\nPATH=" in output  # it ran, as JOBS_COMMAND_USER
    assert_nothing_leaked(output)
    # var/ is the service's alone (0700, its files 0600), whatever an earlier version left.
    assert output.count("Permission denied") >= 4, output  # the three files and the listing
    assert (var.stat().st_mode & 0o777, (var / "scheduler.sqlite3").stat().st_mode & 0o777) == (0o700, 0o600)
    # The service's processes are not in the command's PID namespace.
    for pid in (worker.pid, beat.pid, server.pid):
        assert f"/proc/{pid}/environ: No such file" in output, output


def test_a_worker_that_is_not_root_refuses_commands_unless_told(processes, people, layout, as_nobody):
    """It cannot change user: the command would run as the service's own user, who owns var/."""
    python, path, checkout = as_nobody
    owned_by(layout, USER)
    worker = processes.worker(concurrency=1, python=python, PYTHONPATH=path, VAR_DIR=str(layout / "var"),
                              popen={"user": USER, "group": GROUP, "extra_groups": [], "cwd": checkout}, **SERVICE_ENV)
    logged(worker, "ready.", "the worker to start")

    run = attack(people, [worker.pid], layout / "var")

    assert (run.status, run.output) == (RunStatus.FAILED, ""), processes.logs()
    assert ("COMMANDS REFUSED: this worker runs as nobody, not root, so every command job on it will fail"
            in Path(worker.log_path).read_text())
    assert run.error == (
        "Commands are refused on this worker: it runs as nobody, not root, so the command would run as the "
        "service's own user and could read its files (var/, the database, the keys). Run the worker as root "
        "(commands then run as JOBS_COMMAND_USER), or set JOBS_COMMAND_RUN_AS_SERVICE_USER=true to allow "
        "commands as the service's user.")


def test_run_as_the_service_user_a_command_cannot_read_the_service_processes_environment(
        processes, people, layout, as_nobody):
    """The operator allowed commands as the service's user, and no isolation: every service process
    of that user (worker, beat, web, Flower) is undumpable, so its /proc/<pid>/environ is root's."""
    python, path, checkout = as_nobody
    owned_by(layout, USER)
    popen = {"user": USER, "group": GROUP, "extra_groups": [], "cwd": checkout}
    env = {**SERVICE_ENV, "VAR_DIR": str(layout / "var"), "PYTHONPATH": path}
    worker = processes.worker(concurrency=1, python=python, popen=popen, JOBS_COMMAND_ISOLATION="off",
                              JOBS_COMMAND_RUN_AS_SERVICE_USER="true", **env)
    beat = processes.start("beat", [python, "-m", "celery", "-A", "scheduler_site", "beat", "-l", "INFO",
                                    "--pidfile=", "-s", str(layout / "beat-schedule")], popen=popen, **env)
    server = web(processes, PORT_BASE + 82, python=python, popen=popen, **env)
    monitor = flower(processes, PORT_BASE + 83, python=python, popen=popen, **env)
    logged(worker, "ready.", "the worker to start")
    logged(beat, "beat: Starting", "beat to start")
    logged(server, "Booting worker", "the web server to start")
    logged(monitor, "Visit me at", "Flower to start")

    run = attack(people, [worker.pid, beat.pid, server.pid, monitor.pid], layout / "var")

    assert run.status == RunStatus.SUCCEEDED, (run.error, processes.logs())
    assert "user: nobody" in run.output
    for pid in (worker.pid, beat.pid, server.pid, monitor.pid):
        assert f"/proc/{pid}/environ: Permission denied" in run.output, run.output
    for name, value in SERVICE_ENV.items():
        assert value not in run.output.split("== env")[0], name  # in no process's environ
        assert f"{name}=" not in run.output.split("== env")[1], name  # nor in its own


def execute(target, **fields):
    job = Job(name="guards", kind="command", target=target, **fields)
    return command_kind.execute(RunContext(run_id=1, attempt=1, job=job, timeout_seconds=30))


def test_the_command_environment_is_an_allow_list(monkeypatch, settings):
    for name, value in {**SERVICE_ENV, "DATABASE_URL": "postgres://u:db-password-0a1b@db/x", "LANG": "C.UTF-8",
                        "LC_TIME": "C", "TZ": "Europe/Paris", "TOOL_HOME": "/opt/tool"}.items():
        monkeypatch.setenv(name, value)
    settings.JOBS_COMMAND_ENV_ALLOW = [*settings.JOBS_COMMAND_ENV_ALLOW, "TOOL_*"]

    output = execute("env", environment={"REPORT": "daily"}).output

    names = {line.split("=")[0] for line in output.splitlines()}
    assert not names & {*SERVICE_ENV, "DATABASE_URL"}, output
    assert {"PATH", "LANG", "LC_TIME", "TZ", "TOOL_HOME", "REPORT", "JOB_RUN_ID", "JOB_ATTEMPT"} <= names, output
    assert "db-password-0a1b" not in output


def test_the_deny_list_still_takes_out_what_the_allow_list_lets_in(monkeypatch, settings):
    monkeypatch.setenv("TOOL_TOKEN", "tool-token-6e2a")
    monkeypatch.setenv("TOOL_HOME", "/opt/tool")
    settings.JOBS_COMMAND_ENV_ALLOW = ["PATH", "TOOL_*"]
    settings.JOBS_COMMAND_ENV_EXCLUDE = ["*_TOKEN"]

    output = execute("env").output

    assert "TOOL_HOME=/opt/tool" in output and "tool-token-6e2a" not in output


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_command_gains_no_privileges(settings, mode):
    """setpriv --no-new-privs: a setuid program (su, passwd, sudo) runs with the command's rights."""
    settings.JOBS_COMMAND_ISOLATION = mode

    assert "NoNewPrivs:\t1" in execute("grep NoNewPrivs /proc/self/status").output


LIMITS = r"sed -n 's/^Max \(processes\|open files\) *\([0-9]*\).*/\2/p' /proc/self/limits"  # its soft limits


def test_a_command_gets_the_default_process_and_open_files_limits(settings):
    settings.JOBS_COMMAND_RLIMIT_NPROC, settings.JOBS_COMMAND_RLIMIT_NOFILE = 200, 512

    assert execute(LIMITS).output.split() == ["200", "512"]
    # The job's own limits win.
    assert execute(LIMITS, max_processes=50, max_open_files=64).output.split() == ["50", "64"]


def test_the_default_limits_are_256_processes_and_1024_open_files():
    assert execute(LIMITS).output.split() == ["256", "1024"]


@pytest.fixture
def namespaces_refused(tmp_path, monkeypatch):
    """A host where unshare is refused (Ubuntu 24.04's AppArmor, a container's seccomp): an unshare
    that fails as it does there, first on the PATH."""
    require(shutil.which("setpriv") is not None, "util-linux's setpriv")
    (tmp_path / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n")
    (tmp_path / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    isolation._probe.cache_clear()
    yield
    isolation._probe.cache_clear()


def test_auto_isolation_fails_closed_naming_why(settings, namespaces_refused):
    settings.JOBS_COMMAND_ISOLATION = "auto"

    with pytest.raises(JobFailed) as failed:
        execute("echo ran unisolated")

    assert str(failed.value) == (
        "Cannot isolate the command (JOBS_COMMAND_ISOLATION=auto): unshare failed: unshare: unshare failed: "
        "Operation not permitted; set JOBS_COMMAND_ISOLATION=off to run commands without isolation, knowing "
        "what is lost")


def test_off_set_on_purpose_runs_the_command_unisolated(settings, namespaces_refused):
    settings.JOBS_COMMAND_ISOLATION = "off"

    assert execute("echo ran unisolated").output.strip() == "ran unisolated"


def test_the_service_processes_write_their_files_for_their_user_alone(tmp_path):
    """manage.py migrate makes the SQLite database 0600 (the quick start's first run)."""
    database = tmp_path / "scheduler.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "VAR_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert database.stat().st_mode & 0o777 == 0o600


def test_manage_py_is_undumpable_and_writes_for_its_user_alone():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c",
                           "import os; from jobs.worker.hardening import is_dumpable; "
                           "print('dumpable', is_dumpable(), 'umask', oct(os.umask(0o077)))"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "dumpable False umask 0o77"


def test_the_web_opens_no_control_socket(processes, tmp_path, monkeypatch):
    """As ``scheduler web`` starts it (scheduler_site.gunicorn_conf): gunicorn's control socket, which
    would let any process of the service's user stop the web, is not opened."""
    from scheduler_site.cli import web_argv

    from ..cli_support import free_port

    home, port = tmp_path / "home", free_port()
    home.mkdir()
    monkeypatch.setenv("WEB_BIND", f"127.0.0.1:{port}")
    web = processes.start("web", web_argv([]), HOME=str(home), XDG_RUNTIME_DIR="")
    # The master opens the socket once it has started its workers: by a worker's first answer, it has.
    wait_for(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), timeout=90, message="the web to answer")
    assert not (home / ".gunicorn").exists()
    assert "control socket" not in Path(web.log_path).read_text(errors="replace").lower()


def answers(url):
    try:
        return urllib.request.urlopen(url, timeout=5).status == 200
    except OSError:
        return False
