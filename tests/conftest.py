"""Fixtures that start real Celery workers and beat processes against the test database and a
Redis database of their own, and kill them (by process group) when the test ends."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

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


def wait_for(predicate, timeout=30.0, interval=0.2, message="condition"):
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def database_url():
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Processes:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.started = []

    def env(self, **overrides):
        env = dict(os.environ)
        env.update(PROCESS_ENV)
        env.update(DATABASE_URL=database_url(), REDIS_URL=settings.REDIS_URL, PYTHONPATH=str(REPO))
        env.update({k: str(v) for k, v in overrides.items()})
        return env

    def start(self, name, argv, **env):
        log_path = self.log_dir / f"{name}-{len(self.started)}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, cwd=REPO, env=self.env(**env), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        proc.log_path = log_path
        self.started.append(proc)
        return proc

    def worker(self, concurrency=2, queues=None, name=None, pool="prefork", **env):
        name = name or f"w{len(self.started)}"
        argv = [sys.executable, "-m", "celery", "-A", "scheduler_site", "worker", "-l", "INFO",
                "-c", str(concurrency), "-P", pool, "-n", f"{name}@%h",
                "-Q", queues or settings.JOBS_DEFAULT_QUEUE, "--without-gossip", "--without-mingle"]
        return self.start(f"worker-{name}", argv, **env)

    def beat(self, name=None, **env):
        name = name or f"beat{len(self.started)}"
        argv = [sys.executable, "-m", "celery", "-A", "scheduler_site", "beat", "-l", "INFO",
                "--pidfile=", "-s", str(self.log_dir / f"{name}-schedule")]
        return self.start(f"beat-{name}", argv, JOBS_NODE_NAME=name, **env)

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


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def processes(transactional_db, redis_client, tmp_path, request):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(procs.logs())


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
