"""The nemesis: faults picked at random from a seed, one every 10-40 s, each undone before the next.

Each fault names its target (a host, the broker, the database) and is written down with its
start and end (wall clock) for the checker, which blames a duplicate execution on the fault that
was acting on the execution's host while it ran. A process killed is started again a couple of
seconds later, as a supervisor would; a process stopped is continued, a host cut off healed.
"""

import contextlib
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field

from django.db import connection

from .cluster import alive, children, clock_skewed, signal_group, signal_pid, stopped_for

# The faults that act on one worker host, and those on the leader's host (its beat).
WORKER_FAULTS = ("worker-parent-kill", "worker-child-kill", "worker-parent-stop", "worker-child-stop",
                 "worker-partition")
LEADER_FAULTS = ("leader-kill", "leader-stop", "leader-partition")
# Faults on one host that must cost nothing: no duplicate is ever blamed on them (unless a process
# had to be killed after all, which the fault then says).
HARMLESS_FAULTS = ("clock-skew", "disk-full")
BROKER_FAULTS = {"sentinel": ("redis-master-kill", "sentinel-failover"), "rabbitmq-cluster": ("rabbit-node-kill",)}
MAX_SKEW_SECONDS = 120
GRACEFUL_STOP_SECONDS = 40  # a warm shutdown waits for the runs it holds (a command takes up to 20 s)


def faults_for(broker_kind):
    """The faults a run on this broker set-up picks from."""
    return WORKER_FAULTS + LEADER_FAULTS + HARMLESS_FAULTS + BROKER_FAULTS[broker_kind] + ("postgres-restart",)


@dataclass
class Fault:
    number: int
    kind: str
    target: str  # a host's name, "broker" or "postgres"
    started: float  # wall clock
    ended: float = 0.0
    detail: str = ""
    killed: bool = False  # a harmless fault that had to kill a process after all
    pid: int = 0  # the process a SIGSTOP froze

    @property
    def on_host(self):
        """Whether a duplicate execution on the fault's host while it acted is explained by it."""
        return self.kind in WORKER_FAULTS or self.kind in LEADER_FAULTS or self.killed


@dataclass
class Nemesis:
    """Faults on ``service`` (a test_nemesis.Service), from ``seed``."""

    service: object
    seed: int
    kinds: tuple = ()
    faults: list = field(default_factory=list)

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        self.current = None  # the fault acting now
        self.kinds = self.kinds or faults_for(self.service.broker.kind)

    def run(self, seconds, log=print):
        """Inject faults for ``seconds``: the first after 10-40 s, then each 10-40 s after the start
        of the one before (at once if that one took longer). Returns the faults."""
        deadline = time.monotonic() + seconds
        next_at = time.monotonic() + self.rng.uniform(10, 40)
        while next_at < deadline:
            time.sleep(max(0.0, next_at - time.monotonic()))
            started = time.monotonic()
            kind = self.rng.choice(self.kinds)
            fault = self.inject(kind)
            log(f"NEMESIS fault {fault.number} {fault.kind} on {fault.target}: {fault.detail} "
                f"({fault.ended - fault.started:.1f} s)")
            next_at = started + self.rng.uniform(10, 40)
        return self.faults

    def inject(self, kind):
        service, rng = self.service, self.rng
        hold = rng.uniform(3, 15)  # how long a stop or a cut lasts
        if kind in WORKER_FAULTS:
            target = rng.choice(sorted(service.workers))
        elif kind in LEADER_FAULTS:
            target = service.leader_host(fallback=rng.choice(sorted(service.beats)))
        elif kind == "clock-skew":
            target = rng.choice(sorted([*service.workers, *service.beats]))
        elif kind == "disk-full":
            target = rng.choice(sorted(service.disks))
        else:
            target = "postgres" if kind.startswith("postgres") else "broker"
        fault = Fault(len(self.faults) + 1, kind, target, time.time())
        self.faults.append(fault)
        self.current = fault
        try:
            fault.detail = getattr(self, kind.replace("-", "_"))(target, hold)
        finally:
            fault.ended = time.time()
            connection.close()  # the test's own connection may have died with the database
        return fault

    # --- worker hosts

    def worker_parent_kill(self, host, hold):
        worker = self.service.workers[host]
        signal_pid(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        time.sleep(2)
        self.service.start_worker(host)
        return f"SIGKILL worker parent {worker.pid}, started again 2 s later"

    def _child(self, host):
        """One of the worker's pool processes, waiting up to 20 s for a worker just started again."""
        deadline = time.monotonic() + 20
        while not (pool := children(self.service.workers[host].pid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return self.rng.choice(sorted(pool)) if pool else None

    def worker_child_kill(self, host, hold):
        child = self._child(host)
        if child is None:
            return "no pool process to kill"
        signal_pid(child, signal.SIGKILL)
        return f"SIGKILL pool process {child}"

    def worker_parent_stop(self, host, hold):
        pid = self.service.workers[host].pid
        return stopped_for(hold, signal_pid, pid, f"worker parent {pid}")

    def worker_child_stop(self, host, hold):
        child = self._child(host)
        if child is None:
            return "no pool process to stop"
        self.current.pid = child
        return stopped_for(hold, signal_pid, child, f"pool process {child}")

    def worker_partition(self, host, hold):
        return self._partition(host, hold)

    def _partition(self, host, hold):
        self.service.network.hosts[host].cut()
        time.sleep(hold)
        self.service.network.hosts[host].heal()
        return f"host {host} cut off for {hold:.1f} s"

    # --- the leader's host

    def leader_kill(self, host, hold):
        beat = self.service.beats[host]
        signal_group(beat.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            beat.wait(timeout=10)
        time.sleep(2)
        self.service.start_beat(host)
        return f"SIGKILL leader beat {beat.pid}, started again 2 s later"

    def leader_stop(self, host, hold):
        pid = self.service.beats[host].pid
        return stopped_for(hold, signal_group, pid, f"leader beat {pid}")

    def leader_partition(self, host, hold):
        return self._partition(host, hold)

    # --- any host

    def clock_skew(self, host, hold):
        """The host's clock off by up to 2 minutes for 20-45 s, its runs and ticks going on meanwhile.
        libfaketime moves the monotonic clock with the wall clock, which a clock step never does (and
        a running worker cannot take), so the host's process is restarted with the skewed clock
        (warm shutdown: the runs it holds end first), and again with the right one after."""
        skew = self.rng.choice((-1, 1)) * self.rng.randint(10, MAX_SKEW_SECONDS)
        lasting = self.rng.uniform(20, 45)
        first = self._restart(host, skew)
        time.sleep(lasting)
        second = self._restart(host, 0)
        return f"clock {skew:+d} s for {lasting:.1f} s ({first}; back: {second})"

    def _restart(self, host, skew):
        """Stop the host's worker or beat gracefully (SIGTERM, SIGKILL if it has not ended within
        GRACEFUL_STOP_SECONDS) and start it again with its clock ``skew`` seconds off."""
        service = self.service
        proc = service.workers.get(host) or service.beats[host]
        signal_pid(proc.pid, signal.SIGTERM)
        how = "warm shutdown"
        try:
            proc.wait(timeout=GRACEFUL_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            self.current.killed, how = True, f"SIGKILL after {GRACEFUL_STOP_SECONDS} s of warm shutdown"
        clock = clock_skewed(skew)
        if host in service.workers:
            service.start_worker(host, **clock)
        else:
            service.start_beat(host, **clock)
        return how

    def disk_full(self, host, hold):
        """The file system of the worker host's TMPDIR (where its commands spool their output) full
        for 3-15 s, then freed."""
        disk = self.service.disks[host]
        filled = disk.fill()
        time.sleep(hold)
        disk.free()
        return f"{disk.path} ({filled // 1024} KiB) full for {hold:.1f} s"

    # --- the broker and the database

    def redis_master_kill(self, target, hold):
        return self.service.broker.kill_master()

    def sentinel_failover(self, target, hold):
        return self.service.broker.failover()

    def rabbit_node_kill(self, target, hold):
        return self.service.broker.kill_node(self.rng, hold)

    def postgres_restart(self, target, hold):
        down = self.rng.uniform(1, 5)
        self.service.postgres.stop("immediate")
        time.sleep(down)
        self.service.postgres.start()
        return f"PostgreSQL crashed (immediate stop), started again {down:.1f} s later"


def heal_everything(service):
    """After the last fault: every host on the network, every disk freed, every process running."""
    for disk in service.disks.values():
        disk.free()
    for host in service.network.hosts.values():
        if host.cut_off:
            host.heal()
    for name, worker in list(service.workers.items()):
        signal_group(worker.pid, signal.SIGCONT)
        if not alive(worker):
            service.start_worker(name)
    for name, beat in list(service.beats.items()):
        signal_group(beat.pid, signal.SIGCONT)
        if not alive(beat):
            service.start_beat(name)
