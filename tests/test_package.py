"""The service packaged: the wheel that ``python -m build --wheel`` makes of a copy of the checkout, installed
with requirements.lock in a new virtualenv, then used both ways the docs say
(docs/how-to/installed-service.md): a service of its own (``scheduler setup``, ``scheduler start``), and
inside a project made by ``django-admin startproject`` with its own Celery app
(docs/how-to/existing-django-project.md, whose titled blocks are written into the project), whose
worker and beat run a job of the project's own Celery task (the job kind task). Each process it starts is killed by its pid."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from types import SimpleNamespace

import pytest
import requests
from django.conf import settings

from scripts.quickstart_service import checkout_copy, new_shell, processes_in

from .conftest import REPO, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              # its own SQLite files and the suite's Redis: once, in a PostgreSQL pass, is enough
              pytest.mark.postgres("builds and installs the wheel, and starts processes of its own")]

PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "16000")) + 483
# Fast timings for the processes, as the suite's (tests/conftest.py's PROCESS_ENV).
FAST = {"JOBS_HEARTBEAT_SECONDS": "1", "JOBS_TICK_SECONDS": "0.2", "JOBS_MONITOR_SECONDS": "0.5",
        "JOBS_RETENTION_INTERVAL_SECONDS": "0"}


def run(argv, cwd, env, timeout=300):
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("package")
    source = root / "source"
    checkout_copy(source)
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"), str(source)],
        root, {**new_shell(), "PIP_NO_INDEX": "1"})
    [wheel] = (root / "dist").glob("job_scheduler-*.whl")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], root, new_shell())
    run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--require-hashes", "-r",
         str(source / "requirements.lock")], root, new_shell(), timeout=600)
    run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-index",
         str(wheel)], root, new_shell())
    return SimpleNamespace(root=root, wheel=wheel, bin=venv / "bin")


class Started:
    """Processes started in ``folder``, stopped by their process groups, then any left there by pid."""

    def __init__(self, folder, env):
        self.folder, self.env, self.procs = folder, env, []

    def start(self, name, argv):
        with open(self.folder / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(argv, cwd=self.folder, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self):
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=15)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in processes_in(self.folder):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def logs(self):
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
                         for path in sorted(self.folder.glob("*.log")))


@pytest.fixture
def started(request):
    made = []

    def start_in(folder, env):
        made.append(Started(folder, env))
        return made[-1]

    yield start_in
    for group in made:
        if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
            print(group.logs())
        group.stop()


class Api:
    def __init__(self, url, token):
        self.url, self.session = url, requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def __call__(self, method, path, expect, **kwargs):
        response = self.session.request(method, f"{self.url}/api/{path}", timeout=30, **kwargs)
        assert response.status_code == expect, (response.status_code, response.text[:2000])
        return response.json()


def web_answers(url, proc):
    assert proc.poll() is None, "the web process ended"
    with contextlib.suppress(requests.ConnectionError, requests.Timeout):
        return requests.get(f"{url}/api/", timeout=5).status_code == 401
    return False


def first_scheduled_run(api, job_id):
    """The job's first scheduled run, once it has ended."""
    def ended():
        runs = api("GET", "runs/", 200, params={"job": job_id, "ordering": "scheduled_for"})["results"]
        return runs and runs[0]["status"] not in ("pending", "queued", "running", "retrying") and runs[0]
    return api("GET", f"runs/{wait_for(ended, timeout=90, interval=0.5, message='a scheduled run')['id']}/", 200)


def assert_the_pages_answer(url):
    login = requests.get(f"{url}/accounts/login/", timeout=10)
    assert login.status_code == 200 and "<h1>Log in</h1>" in login.text
    assert requests.get(f"{url}/static/pages/pages.css", timeout=10).status_code == 200


def test_the_wheel_holds_the_service_and_not_jobsctl(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {"scheduler_site/templates/pages/base.html", "jobs/static/pages/pages.css",
            "workflows/templates/workflows/list.html", "notifications/channels/email/body.html",
            "jobs/migrations/0031_team_ownership.py", "scheduler_site/cli.py"} <= names
    assert not [name for name in names if name.startswith(("jobsctl/", "tests/", "bench/"))]
    assert (installed.bin / "scheduler").is_file() and not (installed.bin / "jobsctl").exists()


def test_a_service_of_its_own_from_the_wheel(installed, started, redis_client, tmp_path):
    folder = tmp_path / "service"
    folder.mkdir()
    port = PORT_BASE
    env = {**new_shell(), **FAST, "REDIS_URL": settings.CELERY_BROKER_URL, "HTTPS": "false", "WEB_BIND": f"127.0.0.1:{port}"}
    scheduler = str(installed.bin / "scheduler")
    said = run([scheduler, "setup"], folder, env)
    assert f"Set up in {folder}" in said
    assert {"secret_key", "secrets_key", "metrics_token", "admin_password", "scheduler.sqlite3"} <= {
        path.name for path in (folder / "var").iterdir()}
    assert (folder / "var").stat().st_mode & 0o777 == 0o700 and (folder / "staticfiles").is_dir()

    honcho = started(folder, env).start("start", [scheduler, "start"])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: web_answers(url, honcho), timeout=120, interval=0.5, message="the installed service's web")
    api = Api(url, run([scheduler, "tokens", "create", "admin"], folder, env).strip().splitlines()[-1])
    # Its pages, from the templates in the wheel, and their static files, collected by setup into its folder.
    assert_the_pages_answer(url)
    job = api("POST", "jobs/", 201, json={"name": "hello", "kind": "callable", "target": "builtin.echo",
                                           "args": ["packaged"], "schedule": {"type": "interval", "every_seconds": 2}})
    done = first_scheduled_run(api, job["id"])
    assert (done["status"], done["trigger"], done["result"]) == (
        "succeeded", "schedule", {"args": ["packaged"], "kwargs": {}})


def the_docs_blocks():
    """The titled python blocks of docs/how-to/existing-django-project.md: (path, append?, text)."""
    text = (REPO / "docs" / "how-to" / "existing-django-project.md").read_text()
    return [(title.split(",")[0], "at the end" in title, body)
            for title, body in re.findall(r'```python title="([^"]+)"\n(.*?)```', text, re.S)]


def test_inside_a_django_project_with_its_own_celery_app(installed, started, redis_client, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    port = PORT_BASE + 1
    env = {**new_shell(), **FAST, "REDIS_URL": settings.CELERY_BROKER_URL, "HTTPS": "false",
           "DATABASE_URL": f"sqlite:///{project / 'db.sqlite3'}", "JOBS_CALLABLE_MODULES": "jobs.builtin,billing.tasks",
           "DJANGO_SUPERUSER_PASSWORD": "a-long-test-password-1729"}
    run([str(installed.bin / "django-admin"), "startproject", "proj", "."], project, env)
    (project / "billing").mkdir()
    (project / "billing" / "__init__.py").touch()
    blocks = the_docs_blocks()
    assert {path for path, _, _ in blocks} == {"proj/settings.py", "proj/urls.py", "proj/celery.py", "proj/__init__.py",
                                                "billing/tasks.py"}
    for path, append, body in blocks:
        with open(project / path, "a" if append else "w") as file:
            file.write(("\n" if append else "") + body)

    python = str(installed.bin / "python")
    run([python, "manage.py", "migrate", "--noinput"], project, env)
    run([python, "manage.py", "collectstatic", "--noinput"], project, env)
    run([python, "manage.py", "createsuperuser", "--noinput", "--username", "admin", "--email", "a@example.com"],
        project, env)
    group = started(project, env)
    group.start("worker", [str(installed.bin / "celery"), "-A", "proj", "worker", "-Q", "jobs", "-c", "1", "-l", "INFO",
                           "--without-gossip", "--without-mingle"])
    group.start("beat", [str(installed.bin / "celery"), "-A", "proj", "beat", "-l", "INFO", "-s",
                         str(project / "beat-schedule")])
    web = group.start("web", [str(installed.bin / "gunicorn"), "proj.wsgi", "--bind", f"127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: web_answers(url, web), timeout=120, interval=0.5, message="the project's web")
    api = Api(url, run([python, "manage.py", "tokens", "create", "admin"], project, env).strip().splitlines()[-1])
    assert_the_pages_answer(url)
    # The project's admin is its own, with the service's models in it.
    assert requests.get(f"{url}/admin/", timeout=10, allow_redirects=False).status_code == 302

    job = api("POST", "jobs/", 201, json={"name": "close-day", "kind": "task", "target": "billing.tasks.close_day",
                                           "kwargs": {"day": "2026-11-28"},
                                           "schedule": {"type": "interval", "every_seconds": 2}})
    done = first_scheduled_run(api, job["id"])
    assert (done["status"], done["trigger"], done["result"]) == ("succeeded", "schedule", {"closed": "2026-11-28"})
    # Run by the project's worker (celery -A proj), which alone can import billing.
    assert "celery@" in done["worker"]
    worker_log = (project / "worker.log").read_text(errors="replace")
    assert "proj" in worker_log and "jobs.execute_" in worker_log, worker_log[-3000:]
    # A target the project does not have is refused, naming it.
    refused = api("POST", "jobs/", 400, json={"name": "nope", "kind": "task", "target": "billing.tasks.nothing"})
    assert "billing.tasks.nothing" in json.dumps(refused)
    # The task's signature is checked when the job is saved: a keyword it does not take is named.
    misfit = api("POST", "jobs/", 400, json={"name": "misfit", "kind": "task", "target": "billing.tasks.close_day",
                                             "kwargs": {"day": "2026-11-28", "month": 11}})
    assert "month" in json.dumps(misfit)
