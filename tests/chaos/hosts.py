"""Several hosts on one machine: a network of Linux network namespaces.

The core host (PostgreSQL, the broker, the test itself) is the root namespace; every other host
is a namespace of its own, joined to the core by a veth pair on a bridge, with its own address on
a subnet of this test session's (from TEST_PORT_BASE, so passes running side by side never share
names or addresses). Processes of a host run under ``ip netns exec``.

A host is cut off by taking the core's end of its veth pair down: the host's own interface stays
up with its routes, and every packet it sends is dropped on the wire, as across a pulled cable or
a partition (connections hang until TCP's timeouts, new ones wait for ARP). Taking the host's own
end down instead would fail every send at once (``ENETUNREACH``): easier on the software, and
not what a partition looks like.

Everything is named from the session (``h<port base>...``) and removed by name, and the processes
left in a host's namespace by PID, even after a test that failed or a run that was killed.
"""

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..conftest import require
from .servers import PORT_BASE


def ip(*args, namespace=None, check=True):
    argv = ["ip", *(["netns", "exec", namespace, "ip"] if namespace else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout


def can_make_namespaces():
    """Whether this process may create network namespaces, veth pairs and bridges (root, iproute2)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"h{PORT_BASE}probe"
    try:
        ip("netns", "add", probe)
        return True
    except (RuntimeError, OSError):
        return False
    finally:
        ip("netns", "del", probe, check=False)


def _free_subnet():
    """A /24 in 10.77.0.0/16 that no interface of this machine uses, tried from one derived from
    the session's port base (so two sessions start apart)."""
    used = {int(octet) for octet in re.findall(r"inet 10\.77\.(\d+)\.", ip("-4", "-o", "addr", "show"))}
    first = PORT_BASE // 10 % 200 + 20
    for offset in range(250):
        third = (first + offset) % 250 + 1
        if third not in used:
            return ipaddress.ip_network(f"10.77.{third}.0/24")
    raise RuntimeError("no free subnet in 10.77.0.0/16")


class Host:
    """A host of the topology: its namespace, its address, and the core's end of its link."""

    def __init__(self, network, name, address):
        self.network = network
        self.name = name
        self.namespace = f"{network.prefix}{name}"
        self.address = address
        self.hostname = f"host-{name}"  # what a worker here calls itself (its node name's host part)
        self.link = f"{network.prefix}{name}"  # the core's end of the veth pair, on the bridge
        self.cut_off = False

    def argv(self, argv):
        """``argv`` run on this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def env(self, database_url, broker_url):
        """The variables that point a process of this host at the core's database and broker."""
        core = str(self.network.core_address)
        return {"DATABASE_URL": _on(database_url, core), "CELERY_BROKER_URL": _on(broker_url, core)}

    def cut(self):
        """Cut the host off: everything it sends from now on is dropped."""
        ip("link", "set", self.link, "down")
        self.cut_off = True

    def heal(self):
        ip("link", "set", self.link, "up")
        self.cut_off = False

    def pids(self):
        out = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True).stdout
        return [int(pid) for pid in out.split()]


def _on(url, address):
    """``url`` with its host part 127.0.0.1 replaced by ``address``."""
    if "127.0.0.1" not in url:
        raise ValueError(f"{url} does not point at 127.0.0.1")
    return url.replace("127.0.0.1", address)


class Network:
    """The bridge on the core host and the hosts on it. Use as a context manager: leaving it
    removes every host, its processes and the bridge, whatever happened."""

    def __init__(self):
        self.prefix = f"h{PORT_BASE}"
        self.bridge = f"{self.prefix}br"
        self.hosts = {}
        self.subnet = None
        self.core_address = None

    def __enter__(self):
        self.remove()  # leftovers of a session that was killed before it could clean up
        self.subnet = _free_subnet()
        self.core_address = self.subnet.network_address + 1
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.core_address}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        return self

    def __exit__(self, *exc_info):
        self.remove()

    def add_host(self, name):
        """A new host ``name`` (a letter or two: it ends up in interface names of 15 characters)."""
        host = Host(self, name, self.subnet.network_address + 10 + len(self.hosts) + 1)
        ip("netns", "add", host.namespace)
        ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
        ip("link", "set", host.link, "master", self.bridge)
        ip("link", "set", host.link, "up")
        ip("addr", "add", f"{host.address}/24", "dev", "eth0", namespace=host.namespace)
        ip("link", "set", "eth0", "up", namespace=host.namespace)
        ip("link", "set", "lo", "up", namespace=host.namespace)
        self.hosts[name] = host
        return host

    def remove(self):
        """Kill every process left in this session's namespaces, delete them and the bridge."""
        for namespace in _namespaces(self.prefix):
            _kill_namespace_processes(namespace)
            ip("netns", "del", namespace, check=False)
        for link in _links(self.prefix):
            ip("link", "del", link, check=False)
        self.hosts = {}


def _namespaces(prefix):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.split() and line.split()[0].startswith(prefix)]


def _links(prefix):
    return [path.name for path in Path("/sys/class/net").iterdir() if path.name.startswith(prefix)]


def _kill_namespace_processes(namespace):
    for _ in range(50):
        out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
        pids = [int(pid) for pid in out.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def faketime_library():
    """libfaketime (Debian's ``faketime`` package), which shifts a process's wall clock, or None."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


def clock_shifted(seconds):
    """The environment of a process whose clocks are ``seconds`` off (libfaketime's DONT_FAKE_MONOTONIC
    would keep the monotonic one, but breaks Python's sleep: EINVAL from clock_nanosleep). The
    kernel's /proc/uptime stays true: the ledgers of tests/nemesis read it."""
    library = faketime_library()
    require(library is not None, "libfaketime is not installed (apt-get install faketime)")
    return {"LD_PRELOAD": str(library), "FAKETIME": f"{seconds:+d}s"}
