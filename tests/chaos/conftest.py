"""Fixtures of the chaos suite: a scoreboard of the scenarios (printed as a table at the end of
``pytest tests/chaos -s``), the processes pointed at a private broker (``broker``: Redis, or the
brokers a scenario names with ``pytest.mark.brokers``, from tests/brokers.py), private servers a
test may break (tests/chaos/servers.py), and helpers to find the processes a fault is aimed at."""

import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from jobs.models import RunStatus
from jobs.scheduling.leader import current_leader

from ..conftest import Processes, require, wait_for
from .servers import PORT_BASE, PrivatePostgres, free_port, postgres_bindir  # noqa: F401

SUMMARIES = []
HEADER = ("scenario", "runs expected", "runs seen", "lost", "duplicate executions", "recover s",
          "dup deliveries dropped")

# The service's own timings (tests/conftest.py's PROCESS_ENV makes them fast): a scenario that
# measures what an operator would see starts its processes with these removed.
DEFAULT_TIMINGS = dict.fromkeys(("JOBS_HEARTBEAT_SECONDS", "JOBS_LOST_AFTER_HEARTBEATS", "JOBS_TICK_SECONDS",
                                 "JOBS_MONITOR_SECONDS", "JOBS_LEADER_TTL_SECONDS", "JOBS_KILL_GRACE_SECONDS",
                                 "JOBS_REPUBLISH_AFTER_SECONDS"))


class Scoreboard:
    def record(self, scenario, expected, seen, duplicates, recover_seconds=None, lost=None):
        """One row of the table. ``expected``: runs the test's clock says were due (slots, plus the
        runs it started); ``seen``: those that ended as they should (succeeded, or skipped with a
        recorded reason where the policy says so); ``lost`` (default: expected - seen): runs that
        never came or never ended; ``duplicates``: executions of a run beyond one. The dropped
        deliveries are what the claim refused (the database is fresh for each test)."""
        from jobs.lifecycle import DUPLICATES_DROPPED
        from jobs.models import DeliveryCounter

        lost = max(0, expected - seen) if lost is None else lost
        dropped = DeliveryCounter.get(DUPLICATES_DROPPED)
        recover = "-" if recover_seconds is None else f"{recover_seconds:.1f}"
        scenario = f"{scenario} [{self.broker}]"
        row = (scenario, str(expected), str(seen), str(lost), str(duplicates), recover, str(dropped))
        SUMMARIES.append(row)
        print(f"\nCHAOS {scenario}: expected={expected} seen={seen} lost={lost} duplicates={duplicates} "
              f"recover_s={recover} dropped_deliveries={dropped}")


@pytest.fixture
def scoreboard(broker):
    scoreboard = Scoreboard()
    scoreboard.broker = broker.kind
    return scoreboard


@pytest.fixture
def processes(transactional_db, broker, tmp_path, request):
    """The test's workers and beats, on the test's private broker."""
    procs = Processes(tmp_path, broker.env)
    yield procs
    procs.stop_all()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(procs.logs())


def pytest_terminal_summary(terminalreporter):
    if not SUMMARIES:
        return
    widths = [max(len(row[i]) for row in [HEADER, *SUMMARIES]) for i in range(len(HEADER))]
    terminalreporter.section("chaos scenarios")
    for row in [HEADER, *SUMMARIES]:
        terminalreporter.write_line("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


@pytest.fixture
def private_postgres(transactional_db):
    """A PostgreSQL cluster of the test's own holding a copy of the test database; while the test
    runs, the ORM (and so every process the test starts) uses it. Ask for it before ``processes``,
    so that the processes stop before it goes."""
    with serving_the_test_database(PrivatePostgres(private_postgres_bindir())) as server:
        yield server


def private_postgres_bindir():
    bindir = postgres_bindir()
    require(bindir is not None, "no PostgreSQL server binaries (initdb, pg_ctl from pg_config --bindir)")
    return bindir


@contextlib.contextmanager
def postgres_on_the_core(network):
    """The test database on a PostgreSQL of the test's own on the core host, which the hosts of
    ``network`` (tests/chaos/hosts.py) reach across the bridge."""
    server = PrivatePostgres(private_postgres_bindir(), listen=[str(network.core_address)],
                             trusted=[str(network.subnet)])
    with serving_the_test_database(server):
        yield server


@contextlib.contextmanager
def serving_the_test_database(server):
    """Create ``server`` (a PrivatePostgres) with a copy of the test database, and point the ORM
    at it inside the block; destroy it after."""
    saved = dict(connection.settings_dict)
    try:
        server.create(copy_of=connection)
        connection.close()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(server.port), NAME=PrivatePostgres.DATABASE)
        yield server
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
        server.destroy()


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
    """Save a job; an interval job remembers its first slot as ``first_slot``, checked against the
    clock: ``every`` seconds after it was saved."""
    from jobs.definitions.jobs import save_job
    from jobs.models import Job

    before = timezone.now()
    job = save_job(Job(name=name, kind=kind, target=target, **fields), schedule or {"type": "manual"})
    if job.schedule_type == "interval":
        every = job.every_seconds
        assert before.timestamp() + every <= job.next_run_at.timestamp() <= timezone.now().timestamp() + every
        job.first_slot = job.next_run_at
    return job


def every_second_job(name, ledger):
    return make_job(name, kwargs={"path": ledger.path}, schedule={"type": "interval", "every_seconds": 1})


def wait_for_runs(job, count, after=None, timeout=20):
    from jobs.models import RunStatus

    runs = job.runs.filter(status=RunStatus.SUCCEEDED)
    if after is not None:
        runs = runs.filter(scheduled_for__gt=after)
    wait_for(lambda: runs.count() >= count, timeout=timeout, message=f"{count} succeeded runs")


def pause_and_check(job, ledger):
    """Pause the job so no slot is added (beat keeps running its monitor), then check every slot
    due by then on the test's clock (one run each, its effect once), and the runs' invariants."""
    from jobs.definitions.jobs import pause
    from jobs.lifecycle.runs import PAUSED_BEFORE_START

    from . import invariants

    paused_at = timezone.now()
    pause(job)
    slots = invariants.check_slots(job, paused_at, ledger)
    # Runs made ahead of their slots (JOBS_DISPATCH_AHEAD_SECONDS) for slots after the pause are
    # skipped at their slot, as they should be.
    after_the_pause = Q(status=RunStatus.SKIPPED, reason=PAUSED_BEFORE_START, scheduled_for__gt=paused_at)
    verdict = invariants.check(invariants.runs_of(job).exclude(after_the_pause), ledger, terminal_within=30)
    return slots, verdict


def started_attempt(run, number=1, timeout=20):
    """The JobAttempt once the worker claimed the run for attempt ``number``."""
    return wait_for(lambda: run.attempts.filter(number=number).first(), timeout=timeout,
                    message=f"run {run.pk} attempt {number} to start")


def ledger_has(ledger, kind, key):
    return any(row[0] == kind and row[1] == key for row in ledger.lines())


@pytest.fixture
def ticks_file():
    """A file the job's command may write: commands run as an unprivileged user (JOBS_COMMAND_USER)."""
    folder = Path(tempfile.mkdtemp(prefix="fence-"))
    folder.chmod(0o777)
    path = folder / "ticks.txt"
    path.touch(mode=0o666)
    path.chmod(0o666)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


def ticks(path, attempt=None):
    lines = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    return [float(stamp) for number, stamp in lines if attempt is None or int(number) == attempt]
