"""A 3-node RabbitMQ cluster on the core host for the nemesis: each node with its own name, ports
and data, one epmd and one Erlang cookie of the cluster's, all on spare ports from TEST_PORT_BASE;
each listens on 127.0.0.1 and on the core's address on the bridge, so that the hosts reach it.
The service declares its job queues as quorum queues (scheduler_site/broker.py): replicated on the
three nodes, they keep their messages while one node is down. Clients get the three nodes' URLs
(kombu fails over from one to the next)."""

import shutil
import subprocess
import time
from pathlib import Path

from ..brokers import Broker, _kill, _listens, free_port, wait_until, write_rabbit_config


class RabbitNode:
    def __init__(self, cluster, index, port):
        self.cluster, self.index, self.port = cluster, index, port
        self.dist_port = free_port(port + 1)
        self.name = f"nemesis{index}-{cluster.epmd_port}@localhost"
        self.base = cluster.base / f"n{index}"
        self.base.mkdir(parents=True, exist_ok=True)
        write_rabbit_config(self.base, port, ["127.0.0.1", cluster.address])
        self.proc = None

    def environment(self):
        return {
            "PATH": "/usr/lib/rabbitmq/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(self.cluster.home),
            "ERL_EPMD_PORT": str(self.cluster.epmd_port), "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"), "RABBITMQ_LOG_BASE": str(self.base / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(self.base / "rabbitmq.pid"),
        }

    def start(self):
        server = shutil.which("rabbitmq-server", path="/usr/lib/rabbitmq/bin") or "rabbitmq-server"
        with open(self.base / "server.out", "ab") as out:
            self.proc = subprocess.Popen([server], env=self.environment(), cwd=self.base, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.cluster.started.append(self.proc)
        wait_until(lambda: _listens(self.port) or self.proc.poll() is not None, 180, f"RabbitMQ node {self.name}")
        if self.proc.poll() is not None:
            raise RuntimeError(f"RabbitMQ did not start: {(self.base / 'server.out').read_text()[-2000:]}")

    def kill(self):
        _kill(self.proc, self.port, self.dist_port)

    def ctl(self, *args, timeout=120):
        ctl = shutil.which("rabbitmqctl", path="/usr/lib/rabbitmq/bin") or "rabbitmqctl"
        return subprocess.run([ctl, "-n", self.name, *args], env=self.environment(), capture_output=True,
                              text=True, timeout=timeout, check=True).stdout


class RabbitCluster(Broker):
    kind = "rabbitmq-cluster"

    def __init__(self, base, address, port_base):
        self.base, self.address = Path(base), str(address)
        self.epmd_port = free_port(port_base)
        self.home = self.base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(f"nemesis-{self.epmd_port}")
        cookie.chmod(0o400)
        self.started = []
        self.epmd = subprocess.Popen([shutil.which("epmd") or "epmd", "-port", str(self.epmd_port)], cwd=self.base,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.nodes, port = [], self.epmd_port + 1
        for index in range(1, 4):
            port = free_port(port + 2)
            self.nodes.append(RabbitNode(self, index, port))
        self.url = ";".join(f"amqp://guest:guest@127.0.0.1:{node.port}//" for node in self.nodes)
        first, *others = self.nodes
        first.start()
        for node in others:
            node.start()
            node.ctl("stop_app")
            node.ctl("join_cluster", first.name)
            node.ctl("start_app")
        running = first.ctl("cluster_status", "--formatter", "json")
        if not all(node.name in running for node in self.nodes):
            raise RuntimeError(f"the cluster did not form: {running}")

    def kill_node(self, rng, hold):
        """SIGKILL one node, start it again ``hold`` seconds later on its data (it rejoins)."""
        node = rng.choice(self.nodes)
        node.kill()
        time.sleep(hold)
        node.start()
        return f"node {node.index} (:{node.port}) killed, started again {hold:.1f} s later"

    def stop(self):
        for proc in reversed(self.started):
            _kill(proc)
        _kill(self.epmd, self.epmd_port)
