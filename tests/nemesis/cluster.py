"""The service as a nemesis run starts it: hosts in network namespaces (tests/chaos/hosts.py) for two
schedulers and three workers, PostgreSQL on the core host (tests/chaos/servers.py), and Redis with
Sentinel on the core host, reachable from every host.

Sentinel hands its clients the master's address as it monitors it: here the core's address on the
bridge (not 127.0.0.1, which inside a host's namespace is the host itself), so that the master, the
replica and the three sentinels listen on it as well as on 127.0.0.1.
"""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import redis

from ..brokers import PrivateRedis, SentinelBroker, _kill, free_port, wait_until
from ..chaos.hosts import clock_shifted

MASTER_NAME = "scheduler-nemesis"


class CoreSentinel(SentinelBroker):
    """A master, one replica and three sentinels on the core host (``address``: the core's address
    on the bridge, which the sentinels give out as the master's)."""

    master_name = MASTER_NAME

    def __init__(self, log_dir, address, port_base):
        self.log_dir = Path(log_dir)
        self.address = str(address)
        self.servers = []
        first = PrivateRedis(log_dir, free_port(port_base), bind=[self.address])
        first.start()
        second = PrivateRedis(log_dir, free_port(first.port + 1), bind=[self.address])
        second.start("--replicaof", self.address, str(first.port))
        self.servers = [first, second]
        self.sentinels = []
        port = second.port
        for _ in range(3):
            port = free_port(port + 1)
            self.sentinels.append([port, self.start_sentinel(port, self.address, first.port, bind=[self.address])])
        self.url = ";".join(f"sentinel://127.0.0.1:{port}" for port, _ in self.sentinels)

    def _server(self, port):
        return next(server for server in self.servers if server.port == port)

    def _writable(self, port):
        with contextlib.suppress(redis.RedisError, OSError):
            return redis.Redis(port=port, socket_timeout=2).info("replication")["role"] == "master"
        return False

    def kill_master(self):
        """SIGKILL the master, wait for the sentinels to promote the replica, then start the old master
        again, empty, as a replica of the new one. Returns what happened, for the fault list."""
        old = self._server(self.master_port())
        new = next(server for server in self.servers if server is not old)
        old.kill()
        wait_until(lambda: self.master_port() == new.port and self._writable(new.port), 60,
                   "the sentinels to promote the replica")
        old.start("--replicaof", self.address, str(new.port))
        return f"master :{old.port} killed, :{new.port} promoted"

    def failover(self):
        """A failover the sentinels carry out (SENTINEL FAILOVER): the master steps down to replica."""
        old = self.master_port()
        new = next(server.port for server in self.servers if server.port != old)
        # The replica must have caught up and be known to the sentinels before a failover can start.
        deadline = time.monotonic() + 30
        while True:
            try:
                redis.Redis(port=self.sentinels[0][0], socket_timeout=5).execute_command(
                    "SENTINEL", "FAILOVER", MASTER_NAME)
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        wait_until(lambda: self.master_port() == new and self._writable(new), 60, "the failover to complete")
        return f"failover :{old} -> :{new}"

    def lose_messages(self, queue):
        redis.Redis(port=self.master_port()).flushdb()

    def stop(self):
        for port, proc in self.sentinels:
            _kill(proc, port)
        for server in self.servers:
            server.kill()


def children(pid):
    """The pids whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def signal_pid(pid, sig):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def signal_group(pid, sig):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def stopped_for(hold, send, pid, what):
    """SIGSTOP ``pid`` through ``send`` (signal_pid, or signal_group for its process group), and
    SIGCONT it ``hold`` seconds later; what happened, for the fault list (``what``: the process)."""
    send(pid, signal.SIGSTOP)
    time.sleep(hold)
    send(pid, signal.SIGCONT)
    return f"SIGSTOP {what} for {hold:.1f} s"


def alive(proc):
    return proc is not None and proc.poll() is None


def cont_all(procs):
    for proc in procs:
        if alive(proc):
            signal_group(proc.pid, signal.SIGCONT)


def clock_skewed(seconds):
    """The environment of a process whose clock is ``seconds`` off (none for 0)."""
    return clock_shifted(seconds) if seconds else {}


class SmallDisk:
    """A small file system of a worker host's own (a tmpfs of ``size_kib``), its TMPDIR: the nemesis
    fills it up and frees it again. Unmounted by ``remove``."""

    def __init__(self, path, size_kib=8192):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=1777", "tmpfs", str(self.path)],
                       check=True, capture_output=True, timeout=30)
        self.filler = self.path / "filler"

    def fill(self):
        """Write until the disk is full (ENOSPC); the bytes written."""
        written = 0
        with open(self.filler, "wb", buffering=0) as out:
            for chunk in (b"\0" * 65536, b"\0" * 512):
                with contextlib.suppress(OSError):
                    while True:
                        written += out.write(chunk)
        return written

    def free(self):
        self.filler.unlink(missing_ok=True)

    def remove(self):
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30)
