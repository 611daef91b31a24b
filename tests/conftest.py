"""Fixtures that start real Celery workers and beat processes against the test database and a
Redis database of their own, and kill them (by process group) when the test ends.

The suite runs twice (scripts/test.sh): on PostgreSQL, and on SQLite for the tests that start no
processes. On SQLite the tests that start processes (workers, beat, a browser, private servers:
their fixtures below, and tests/chaos) are left out, with those marked ``postgres`` (they need
something only PostgreSQL has; the marker says what).
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
import pytest_timeout
import redis
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

# The broker fixtures and their parametrisation (tests/brokers.py).
from .brokers import (  # noqa: F401
    TEST_BROKER,
    broker,
    leave_out_other_brokers_tests,
    pytest_generate_tests,
    rabbit_node,
)

REPO = Path(__file__).resolve().parent.parent

# Fast timings for the processes the tests start: heartbeats every second, ticks five times a second.
PROCESS_ENV = {
    "JOBS_HEARTBEAT_SECONDS": "1",
    "JOBS_TICK_SECONDS": "0.2",
    "JOBS_MONITOR_SECONDS": "0.5",
    "JOBS_LEADER_TTL_SECONDS": "3",
    "JOBS_KILL_GRACE_SECONDS": "1",
    "JOBS_REPUBLISH_AFTER_SECONDS": "5",
    "LOG_LEVEL": "INFO",
    # No retention task on the queues unless a test asks for it (some tests count messages).
    "JOBS_RETENTION_INTERVAL_SECONDS": "0",
}


def require(ready, reason):
    """Skip a test whose prerequisite is missing; under CI=true fail it instead, so that a missing
    browser, root or PostgreSQL binary can never pass quietly as a skip."""
    if ready:
        return
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"prerequisite missing (CI=true fails rather than skips): {reason}")
    pytest.skip(reason)


def wait_for(predicate, timeout=30.0, interval=0.2, message="condition"):
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``.
    ``message`` may be a function: what it says is then read when the wait fails, not when it began."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message() if callable(message) else message}")
        time.sleep(interval)


def command_output(*args):
    """What ``manage.py <args>`` writes on its standard output."""
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def manage_py(*args, stdin=None):
    """``manage.py <args>`` in a process of its own, on the test's database: the finished process."""
    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, input=stdin, capture_output=True,
                          text=True, timeout=120)


def database_url():
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Processes:
    def __init__(self, log_dir, broker_env=None):
        self.log_dir = log_dir
        self.broker_env = broker_env or {"CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
        self.started = []

    def env(self, **overrides):
        """The environment of a process: the fast timings, the test's database and Redis, then
        ``overrides`` (a value of None removes the variable, so the service's default applies)."""
        env = dict(os.environ)
        env.update(PROCESS_ENV)
        env.update(DATABASE_URL=database_url(), PYTHONPATH=str(REPO), **self.broker_env)
        env.update({k: str(v) for k, v in overrides.items() if v is not None})
        for name in [k for k, v in overrides.items() if v is None]:
            env.pop(name, None)
        return env

    def start(self, name, argv, popen=None, host=None, **env):
        """``popen``: more Popen arguments (user, group, cwd...). ``host``: a host of tests/chaos/hosts.py
        to run on (in its namespace, reaching the database and the broker at the core's address)."""
        if host is not None:
            argv = host.argv(argv)
            env = {**host.env(database_url(), self.broker_env["CELERY_BROKER_URL"]), **env}
        log_path = self.log_dir / f"{name}-{len(self.started)}.log"
        popen = {"cwd": REPO, **(popen or {})}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, env=self.env(**env), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, **popen)
        proc.log_path = log_path
        self.started.append(proc)
        return proc

    def worker(self, concurrency=2, queues=None, name=None, pool="prefork", python=sys.executable, popen=None,
               host=None, **env):
        name = name or f"w{len(self.started)}"
        argv = [python, "-m", "celery", "-A", "scheduler_site", "worker", "-l", "INFO",
                "-c", str(concurrency), "-P", pool, "-n", f"{name}@{host.hostname if host else '%h'}",
                "-Q", queues or settings.JOBS_DEFAULT_QUEUE, "--without-gossip", "--without-mingle"]
        return self.start(f"worker-{name}", argv, popen=popen, host=host, **env)

    def beat(self, name=None, host=None, **env):
        name = name or f"beat{len(self.started)}"
        argv = [sys.executable, "-m", "celery", "-A", "scheduler_site", "beat", "-l", "INFO",
                "--pidfile=", "-s", str(self.log_dir / f"{name}-schedule")]
        return self.start(f"beat-{name}", argv, host=host, JOBS_NODE_NAME=name, **env)

    def kill(self, proc, sig=signal.SIGKILL, group=True):
        try:
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop_all(self):
        for proc in self.started:
            self.kill(proc, signal.SIGCONT)
            self.kill(proc, signal.SIGKILL)
        for proc in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    def logs(self):
        out = []
        for proc in self.started:
            text = Path(proc.log_path).read_text(errors="replace")
            out.append(f"--- {proc.log_path}\n{text[-4000:]}")
        return "\n".join(out)


# Fixtures that start processes: a SQLite test database lives in the test's own memory.
PROCESS_FIXTURES = {"processes", "live_server", "browser_page", "web", "broker", "ping_web"}


def starts_processes(item):
    return bool(PROCESS_FIXTURES & set(item.fixturenames)) or "chaos" in item.path.parts


def pytest_configure(config):
    config.addinivalue_line("markers", "postgres(why): needs PostgreSQL; left out of the SQLite pass")
    config.addinivalue_line("markers", "sqlite_service: starts the quick start's whole service on a SQLite file of its "
                                       "own: kept in the SQLite pass (scripts/test.sh leaves it out on PostgreSQL)")


# TEST_PROCESSES=broker keeps only the tests whose workers or beat speak to the suite's broker (the
# processes and broker fixtures), but not those that name their brokers (pytest.mark.brokers: they run on
# each one they name already): scripts/test.sh runs them again on RabbitMQ (TEST_BROKER=rabbitmq).
# TEST_PROCESSES=none keeps the SQLite pass's selection, whatever the database (scripts/test.sh --quick).
TEST_PROCESSES = os.environ.get("TEST_PROCESSES", "all")
BROKER_FIXTURES = {"processes", "broker"}


def on_the_suites_broker(item):
    return bool(BROKER_FIXTURES & set(item.fixturenames)) and item.get_closest_marker("brokers") is None


def pytest_collection_modifyitems(config, items):
    leave_out_other_brokers_tests(config, items)
    sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if not sqlite and TEST_PROCESSES == "all":
        return
    kept, left_out = [], []
    for item in items:
        if TEST_PROCESSES == "broker":
            keep = on_the_suites_broker(item)
        elif sqlite and TEST_PROCESSES == "all" and item.get_closest_marker("sqlite_service"):
            keep = True  # its processes use a SQLite file of their own, not the test database
        else:
            keep = not (starts_processes(item) or item.get_closest_marker("postgres")
                        or item.get_closest_marker("sqlite_service"))
        (kept if keep else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture
def people(db):
    """The personas of tests/api_personas.py: staff, a team's owner and member, an outsider, a job."""
    from .api_personas import make_personas

    return make_personas()


def kombu_lists(queue):
    """The Redis lists of ``queue`` as kombu's transport names them, one a priority step: the queue
    itself for step 0, then "<queue>\x06\x16<step>"."""
    return [queue, *(f"{queue}\x06\x16{step}" for step in range(1, 10))]


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def processes(transactional_db, redis_client, tmp_path, request):
    """Workers and beats on the suite's Redis database, or under TEST_BROKER=rabbitmq on the
    session's RabbitMQ node (tests/brokers.py)."""
    procs = Processes(tmp_path, request.getfixturevalue("broker").env if TEST_BROKER != "redis" else None)
    yield procs
    procs.stop_all()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(procs.logs())


# The first test to use the database creates it (every migration) inside its own timeout: beside
# two busy processes that took longer than a chaos test's whole 90 s, and every test of the session
# failed with it. That test is given this much more.
DATABASE_CREATION_SECONDS = 600
_database_created = False


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    global _database_created
    if _database_created or "django_db_setup" not in item.fixturenames:
        return None  # pytest-timeout's own timer, as set
    _database_created = True
    return pytest_timeout.pytest_timeout_set_timer(
        item=item, settings=settings._replace(timeout=settings.timeout + DATABASE_CREATION_SECONDS))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "ledger.txt"
    path.touch()

    class Ledger:
        def __init__(self):
            self.path = str(path)

        def lines(self, prefix=None):
            rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
            return [r for r in rows if prefix is None or r[0] == prefix]

    return Ledger()


@pytest.fixture
def local_http_allowed(settings, monkeypatch):
    """Outbound HTTP may reach this machine's loopback (where the tests' HTTP servers listen): in
    this process and in the processes the test starts. Without it such requests are refused."""
    networks = ["127.0.0.0/8", "::1/128"]
    settings.JOBS_HTTP_ALLOWED_NETWORKS = networks
    monkeypatch.setenv("JOBS_HTTP_ALLOWED_NETWORKS", ",".join(networks))
    return networks


@pytest.fixture(scope="session")
def jobsctl_script(tmp_path_factory):
    from .cli_support import install_cli

    return install_cli(tmp_path_factory.mktemp("jobsctl-install"))


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory, request):
    """A gunicorn web process on the test database (the tests' data comes with transactional_db), and
    on the suite's broker: under TEST_BROKER=rabbitmq, the session's RabbitMQ node."""
    from .cli_support import Web

    broker_env = request.getfixturevalue("rabbit_node").env if TEST_BROKER == "rabbitmq" else {}
    server = Web(tmp_path_factory.mktemp("web"), **broker_env)
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


@pytest.fixture
def jobsctl(jobsctl_script, web, transactional_db, tmp_path):
    from .cli_support import Cli

    home = tmp_path / "home"
    home.mkdir()
    return Cli(jobsctl_script, web.url, home)


@pytest.fixture(autouse=True)
def bundling_asks_afresh():
    """Which jobs are short enough to bundle is cached per process by job id (jobs.lifecycle.bundling):
    ids come again in another test (SQLite reuses them after a rollback)."""
    from jobs.lifecycle import ahead, bundling

    bundling.forget()
    ahead.forget()  # messages a test's dispatch held for a slot (per process, like the cache)


@pytest.fixture(autouse=True)
def cheap_password_hashing(request):
    """Django hashes a password with a million rounds of PBKDF2, half a CPU-second each time (a
    user made with one, a login): a test that starts no processes hashes with MD5. The processes a
    test starts keep the service's hashers, so the users it makes for them keep theirs."""
    if starts_processes(request.node):
        yield
        return
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield
