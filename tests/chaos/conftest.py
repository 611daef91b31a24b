"""Fixtures of the chaos suite: a scoreboard of the scenarios (printed as a table at the end of
``pytest tests/chaos -s``), a private redis-server a test may kill and restart, and helpers to
find the processes a fault is aimed at."""

import contextlib
import socket
import subprocess
import time

import pytest
import redis

from jobs.leader import current_leader

from ..conftest import wait_for

SUMMARIES = []
HEADER = ("scenario", "runs expected", "runs completed", "duplicates", "dup msgs dropped", "recover s")


class Scoreboard:
    def record(self, scenario, expected, completed, duplicates, recover_seconds=None):
        """``duplicates``: executions beyond one per attempt or effects beyond one per run;
        "dup msgs dropped": deliveries the claim refused (the database is fresh for each test)."""
        from jobs.models import DeliveryCounter
        from jobs.runs import DUPLICATES_DROPPED

        dropped = DeliveryCounter.get(DUPLICATES_DROPPED)
        recover = "-" if recover_seconds is None else f"{recover_seconds:.1f}"
        row = (scenario, str(expected), str(completed), str(duplicates), str(dropped), recover)
        SUMMARIES.append(row)
        print(f"\nCHAOS {scenario}: expected={expected} completed={completed} duplicates={duplicates} "
              f"dropped_deliveries={dropped} recover_s={recover}")


@pytest.fixture
def scoreboard():
    return Scoreboard()


def pytest_terminal_summary(terminalreporter):
    if not SUMMARIES:
        return
    widths = [max(len(row[i]) for row in [HEADER, *SUMMARIES]) for i in range(len(HEADER))]
    terminalreporter.section("chaos scenarios")
    for row in [HEADER, *SUMMARIES]:
        terminalreporter.write_line("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def free_port(start=6390):
    for port in range(start, start + 200):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port for a private redis-server")


class PrivateRedis:
    """A redis-server of this test's own, without persistence, so a restart loses every message."""

    def __init__(self, log_dir):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_path = log_dir / f"redis-{self.port}.log"
        self.proc = None

    def start(self):
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--logfile", str(self.log_path)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        wait_for(lambda: _pings(client), timeout=10, message="the private redis-server")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _pings(client):
    with contextlib.suppress(redis.RedisError):
        return client.ping()
    return False


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()


def leader_node():
    leader = current_leader()
    return leader and leader["node"]


def wait_for_leader(timeout=20, other_than=None):
    """The name of the beat node leading now (a different one than ``other_than`` if given)."""
    return wait_for(lambda: (node := leader_node()) and node != other_than and node,
                    timeout=timeout, message=f"a leader other than {other_than}")


def since(start):
    return time.monotonic() - start


def make_job(name, target="test.ledger", kind="callable", schedule=None, **fields):
    from jobs.definitions import save_job
    from jobs.models import Job

    return save_job(Job(name=name, kind=kind, target=target, **fields), schedule or {"type": "manual"})


def started_attempt(run, number=1, timeout=20):
    """The JobAttempt once the worker claimed the run for attempt ``number``."""
    return wait_for(lambda: run.attempts.filter(number=number).first(), timeout=timeout,
                    message=f"run {run.pk} attempt {number} to start")


def ledger_has(ledger, kind, key):
    return any(row[0] == kind and row[1] == key for row in ledger.lines())
