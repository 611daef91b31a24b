"""The nemesis: the whole service as real processes on hosts of their own, faults at random from a
printed seed, and a checker reading a ledger the executions wrote outside the service
(docs/operations/reliability.md, "The nemesis").

    NEMESIS_SECONDS=180 NEMESIS_SEED=12345 .venv/bin/python -m pytest -q -s tests/nemesis

Two scheduler hosts (a beat each, one leads) and three worker hosts (a worker each, 3 pool
processes) in network namespaces (tests/chaos/hosts.py); PostgreSQL and the broker on the core
host: Redis with Sentinel (a master, a replica, three sentinels), or with NEMESIS_BROKER=rabbitmq a
3-node RabbitMQ cluster (tests/nemesis/rabbit.py). ``NEMESIS_REPORT``: a file to write the report
to (Markdown).
"""

import os
import random
import shlex
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.definitions.jobs import pause, save_job
from jobs.models import Job, JobRun
from jobs.scheduling.leader import current_leader
from workflows.definitions import parse_graph, save_workflow
from workflows.models import Workflow

from ..brokers import use
from ..chaos.conftest import postgres_on_the_core
from ..chaos.hosts import Network, can_make_namespaces
from ..chaos.servers import PORT_BASE
from ..conftest import Processes, require, wait_for
from . import checker
from .cluster import CoreSentinel, SmallDisk
from .faults import Nemesis, heal_everything
from .rabbit import RabbitCluster

SECONDS = int(os.environ.get("NEMESIS_SECONDS", "180"))
BROKER = os.environ.get("NEMESIS_BROKER", "redis")  # or "rabbitmq": the 3-node cluster
SEED = int(os.environ.get("NEMESIS_SEED") or random.SystemRandom().randrange(1, 10**9))
# Only these faults (comma-separated kinds, tests/nemesis/faults.py), to chase one: default all.
FAULTS = tuple(kind for kind in os.environ.get("NEMESIS_FAULTS", "").split(",") if kind)
WORKER_HOSTS = ("wa", "wb", "wc")
SCHEDULER_HOSTS = ("sa", "sb")
SETUPS = {"redis": "Redis with Sentinel", "rabbitmq": "RabbitMQ, 3-node cluster, quorum queues"}
QUIET_SECONDS = 20  # after the last fault, before the jobs are paused: the service catches up
DRAIN_SECONDS = 150  # then, for every run to end (a command takes up to 20 s, retries back off)


class Service:
    """What the nemesis acts on: the hosts, their processes, the broker and the database."""

    def __init__(self, network, processes, broker, postgres, ledger_dir, disks):
        self.network, self.processes, self.broker, self.postgres = network, processes, broker, postgres
        self.ledger_dir = ledger_dir
        self.disks = disks  # each worker host's small TMPDIR (cluster.SmallDisk)
        self.workers, self.beats = {}, {}

    def start_worker(self, name, **env):
        """``env``: more variables (a skewed clock's)."""
        self.workers[name] = self.processes.worker(
            concurrency=3, name="worker", host=self.network.hosts[name], NEMESIS_HOST=name,
            TMPDIR=str(self.disks[name].path), **env)

    def start_beat(self, name, **env):
        self.beats[name] = self.processes.beat(name=name, host=self.network.hosts[name], **env)

    def leader_host(self, fallback):
        try:
            leader = current_leader()
        except Exception:  # the database is down: any scheduler host will do
            return fallback
        node = leader and leader["node"]
        return node if node in self.beats else fallback


def ledger_folder():
    """A folder every host's executions may write (commands run as an unprivileged user)."""
    folder = Path(tempfile.mkdtemp(prefix="nemesis-ledger-"))
    folder.chmod(0o777)
    for name in WORKER_HOSTS:
        path = folder / f"ledger-{name}.txt"
        path.touch()
        path.chmod(0o666)
    return folder


def command_target(folder):
    """A command taking 0-20 s (its run id modulo 21), then spooling 100 KiB of output to its
    TMPDIR and reading it back, writing its start and end to its host's ledger: its end says
    "fail" (and it exits 1) when the spool did not fit on the disk."""
    ledger = shlex.quote(str(folder)) + '/ledger-"$NEMESIS_HOST".txt'
    stamp = '$JOB_RUN_ID $JOB_ATTEMPT $NEMESIS_HOST $(cut -d" " -f1 /proc/uptime) $(date +%s.%N)'
    spool = '"$TMPDIR/out-$JOB_RUN_ID-$JOB_ATTEMPT"'
    return (f'echo "start {stamp}" >> {ledger}; sleep $((JOB_RUN_ID % 21)); '
            f'if seq 1 20000 > {spool} 2>/dev/null && tail -n 1 {spool}; then outcome=ok; else outcome=fail; fi; '
            f'rm -f {spool}; echo "end {stamp} $outcome" >> {ledger}; [ $outcome = ok ]')


def make_jobs(folder):
    """The mix. Returns the plan, [(job or workflow, its first slot, seconds between its slots, no
    overlap?)], and every job whose runs the checker reads (the workflow's steps too)."""
    def job(name, schedule, kind="callable", target="test.nemesis", **fields):
        return save_job(Job(name=name, kind=kind, target=target, **fields), schedule)

    ledger = {"ledger_dir": str(folder)}
    retry_after_disk_full = {"max_retries": 2, "retry_backoff_seconds": 10, "retry_jitter": False}
    scheduled = [
        (job("second-allow", {"type": "interval", "every_seconds": 1},
             kwargs={**ledger, "seconds": 0.3, "spool_kib": 256}), 1, False),
        (job("second-forbid", {"type": "interval", "every_seconds": 1}, overlap_policy="skip",
             kwargs={**ledger, "seconds": 2.5}), 1, True),
        (job("second-replace", {"type": "interval", "every_seconds": 2}, overlap_policy="replace",
             kwargs={**ledger, "seconds": 3}), 2, False),
        (job("retrying", {"type": "interval", "every_seconds": 5}, max_retries=2, retry_backoff_seconds=1,
             retry_jitter=False, kwargs={**ledger, "seconds": 0.5, "fail_attempts": 1}), 5, False),
        (job("minute-cron-command", {"type": "cron", "cron": "* * * * *"}, kind="command",
             target=command_target(folder), timeout_seconds=120, **retry_after_disk_full), 60, False),
        (job("minute-forbid-command", {"type": "interval", "every_seconds": 60}, kind="command",
             target=command_target(folder), overlap_policy="skip", timeout_seconds=120, **retry_after_disk_full),
         60, True),
    ]
    steps = [job(f"step-{n}", {"type": "manual"}, kwargs={**ledger, "seconds": 1}) for n in "abc"]
    graph = parse_graph([s.name for s in steps], [{"from": "step-a", "to": "step-b"},
                                                   {"from": "step-a", "to": "step-c"}],
                        {s.name: s for s in steps})
    workflow = save_workflow(Workflow(name="workflow"), {"type": "interval", "every_seconds": 30}, graph)
    plan = [(subject, subject.next_run_at, seconds, forbid)
            for subject, seconds, forbid in [*scheduled, (workflow, 30, False)]]
    return plan, [subject for subject, *_ in scheduled] + steps


@pytest.fixture
def network():
    require(can_make_namespaces(), "cannot create network namespaces (needs root and iproute2)")
    require(shutil.which("redis-server") is not None, "no redis-server (Redis and its sentinels)")
    with Network() as network:
        yield network


@pytest.fixture
def disks():
    """A small disk of its own (tmpfs) for each worker host: its TMPDIR (in a folder the commands'
    unprivileged user can reach)."""
    folder = Path(tempfile.mkdtemp(prefix="nemesis-disks-"))
    folder.chmod(0o755)
    made = {}
    try:
        for name in WORKER_HOSTS:
            made[name] = SmallDisk(folder / name)
        yield made
    finally:
        for disk in made.values():
            disk.remove()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def core_postgres(transactional_db, network):
    with postgres_on_the_core(network) as server:
        yield server


@pytest.fixture
def broker(core_postgres, network, settings, tmp_path_factory):
    """Redis with Sentinel, or (NEMESIS_BROKER=rabbitmq) a 3-node RabbitMQ cluster."""
    if BROKER == "rabbitmq":
        require(shutil.which("rabbitmq-server", path="/usr/lib/rabbitmq/bin:/usr/sbin") is not None,
                "no rabbitmq-server")
        server = RabbitCluster(tmp_path_factory.mktemp("rabbit"), network.core_address, PORT_BASE + 40)
    else:
        server = CoreSentinel(tmp_path_factory.mktemp("sentinel"), network.core_address, PORT_BASE + 20)
    undo = use(server, settings)
    yield server
    undo()
    server.stop()


def report_path():
    return os.environ.get("NEMESIS_REPORT")


@pytest.mark.timeout(SECONDS + 900)
def test_random_faults_lose_no_slot_leave_no_run_unfinished_and_overlap_no_forbid_job(
        network, core_postgres, broker, disks, tmp_path):
    only = f"NEMESIS_FAULTS={','.join(FAULTS)} " if FAULTS else ""
    command = (f"NEMESIS_BROKER={BROKER} NEMESIS_SECONDS={SECONDS} NEMESIS_SEED={SEED} {only}"
               ".venv/bin/python -m pytest -q -s tests/nemesis")
    print(f"\nNEMESIS seed {SEED}, {SECONDS} s of faults; repeat with: {command}")
    began = time.time()
    folder = ledger_folder()
    processes = Processes(tmp_path, broker.env)
    service = Service(network, processes, broker, core_postgres, folder, disks)
    for name in (*SCHEDULER_HOSTS, *WORKER_HOSTS):
        network.add_host(name)
    try:
        for name in WORKER_HOSTS:
            service.start_worker(name)
        for name in SCHEDULER_HOSTS:
            service.start_beat(name)
        plan, jobs = make_jobs(folder)
        wait_for(lambda: JobRun.objects.filter(status="succeeded").count() >= 5, timeout=90,
                 message="the service at work before the first fault")
        faults_from = time.time()
        faults = Nemesis(service, SEED, kinds=FAULTS).run(SECONDS)
        heal_everything(service)
        time.sleep(QUIET_SECONDS)
        paused_at = timezone.now()
        for subject, *_ in plan:
            pause(subject)
        active = JobRun.objects.filter(job__in=jobs).exclude(status__in=checker.TERMINAL)
        deadline = time.monotonic() + DRAIN_SECONDS
        while active.exists() and time.monotonic() < deadline:
            time.sleep(1)
        report = checker.check(plan, jobs, folder, faults, paused_at, faults_from)
        errors = checker.errors_in_logs(proc.log_path for proc in processes.started)
        text = checker.render(report, faults, SETUPS[BROKER], SEED, SECONDS, command, began, errors)
        text += f"\nTook {time.time() - began:.0f} s end to end (set-up of the hosts and servers not counted).\n"
        print("\n" + text)
        (tmp_path / "report.md").write_text(text)
        if report_path():
            Path(report_path()).write_text(text)
        assert report.passed, f"the nemesis found a problem (seed {SEED}): repeat with {command}\n{text}"
    except BaseException:
        print(processes.logs())
        raise
    finally:
        processes.stop_all()
        shutil.rmtree(folder, ignore_errors=True)
