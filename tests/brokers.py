"""Private brokers for the tests, each started on this session's ports (TEST_PORT_BASE) and killed by PID:

- ``redis``: a redis-server without persistence, so a restart loses every message;
- ``sentinel``: a Redis master, one replica and three sentinels (``redis-server --sentinel``);
  its fault kills the master, and a sentinel promotes the replica;
- ``rabbitmq``: a RabbitMQ node of its own (node name, ports, data and log directories, Erlang
  cookie and epmd); its fault kills the node and starts it again on the same data. One node serves
  the session (it takes ~8 s to start); the queues a test used are deleted after it.

The ``broker`` fixture runs a test on Redis, or on the brokers it names with
``pytest.mark.brokers(...)`` (``pytest.mark.brokers(*BROKERS)``: all three): it starts one, points
this test process's Celery app at it, and hands the processes the environment that selects it
(``Broker.env``).

``TEST_BROKER=rabbitmq`` runs every test that takes the ``broker`` fixture (the chaos tests; the
tests of ``processes`` in tests/conftest.py, the end-to-end ones among them) on RabbitMQ only,
whatever broker it names, except those marked ``pytest.mark.redis_only(why)``: they are left out.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis
from celery import Celery, current_app
from django.conf import settings as django_settings
from kombu import Connection, Exchange, Queue, pools

from scheduler_site import broker as broker_settings

BROKERS = ("redis", "sentinel", "rabbitmq")
TEST_BROKER = os.environ.get("TEST_BROKER", "redis")
if TEST_BROKER not in ("redis", "rabbitmq"):
    raise ValueError(f"TEST_BROKER is redis (the default) or rabbitmq, not {TEST_BROKER!r}")
PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "6390"))
MASTER_NAME = "scheduler-test"


def free_port(start):
    for port in range(start, start + 100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port from {start}")


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _answers(url):
    with contextlib.suppress(redis.RedisError, OSError):
        return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping()
    return False


def _listens(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _kill(proc, *ports):
    """SIGKILL the process group ``proc`` leads, and wait until none of ``ports`` is listening any
    more (a server's child may hold its port a moment after the parent was reaped)."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    wait_until(lambda: not any(_listens(port) for port in ports), 10, f"ports {ports} to close")


class Broker:
    kind = ""
    master_name = ""

    @property
    def env(self):
        """The variables that point a worker or beat at this broker (nothing else: no REDIS_URL)."""
        env = {"CELERY_BROKER_URL": self.url}
        if self.master_name:
            env["CELERY_SENTINEL_MASTER_NAME"] = self.master_name
        return env

    def celery_settings(self, **options):
        """``options``: more arguments of scheduler_site.broker.celery_settings (priority_queues)."""
        return {"CELERY_BROKER_URL": self.url, **broker_settings.celery_settings(
            self.url, variable="CELERY_BROKER_URL", master_name=self.master_name,
            visibility_timeout=django_settings.CELERY_VISIBILITY_TIMEOUT,
            max_timeout=django_settings.JOBS_MAX_TIMEOUT_SECONDS, kill_grace=django_settings.JOBS_KILL_GRACE_SECONDS,
            **options)}


class PrivateRedis(Broker):
    """A redis-server without persistence: a restart loses every message."""

    kind = "redis"

    def __init__(self, log_dir, port=None, bind=()):
        """``bind``: more addresses to listen on (the core's, to the hosts of tests/chaos/hosts.py)."""
        self.port = port or free_port(PORT_BASE)
        self.bind = ["127.0.0.1", *bind]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_dir = Path(log_dir)
        self.proc = None

    def start(self, *extra):
        self.kill()  # never two at once
        argv = ["redis-server", "--port", str(self.port), "--bind", *self.bind, "--protected-mode", "no" if len(self.bind) > 1 else "yes", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", str(self.log_dir), "--logfile", str(self.log_dir / f"redis-{self.port}.log"),
                *extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: _answers(self.url), 10, f"redis-server on {self.port}")

    def kill(self):
        _kill(self.proc, self.port)

    def fault(self):
        """SIGKILL, and start again 2 s later, empty."""
        self.kill()
        time.sleep(2)
        self.start()

    def lose_messages(self, queue):
        """Every message gone, as after a FLUSHALL."""
        redis.Redis.from_url(self.url).flushdb()

    def stop(self):
        self.kill()


class SentinelBroker(Broker):
    """Redis behind three sentinels (``sentinels``: their ports and processes, set by a subclass);
    clients find the master through them."""

    kind = "sentinel"

    def start_sentinel(self, port, master_address, master_port, bind=()):
        """A sentinel on ``port`` of 127.0.0.1 and ``bind``, watching the master at ``master_address``."""
        config = self.log_dir / f"sentinel-{port}.conf"
        config.write_text(
            f"port {port}\nbind {' '.join(['127.0.0.1', *bind])}\nprotected-mode {'no' if bind else 'yes'}\n"
            f"dir {self.log_dir}\nlogfile {self.log_dir / f'sentinel-{port}.log'}\n"
            f"sentinel monitor {self.master_name} {master_address} {master_port} 2\n"
            f"sentinel down-after-milliseconds {self.master_name} 1000\n"
            f"sentinel failover-timeout {self.master_name} 5000\n"
            f"sentinel parallel-syncs {self.master_name} 1\n")
        proc = subprocess.Popen(["redis-server", str(config), "--sentinel"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: _answers(f"redis://127.0.0.1:{port}"), 10, f"sentinel on {port}")
        return proc

    def master_port(self):
        """The master's port as the sentinels see it now (the first one that answers), or None."""
        for port, _ in self.sentinels:
            with contextlib.suppress(redis.RedisError, OSError):
                client = redis.Redis(port=port, socket_connect_timeout=1, socket_timeout=2)
                return int(client.execute_command("SENTINEL", "get-master-addr-by-name", self.master_name)[1])
        return None


class PrivateSentinel(SentinelBroker):
    """A master, one replica and three sentinels."""

    master_name = MASTER_NAME

    def __init__(self, log_dir):
        self.log_dir = Path(log_dir)
        self.master = PrivateRedis(log_dir, free_port(PORT_BASE + 20))
        self.master.start()
        self.replica = PrivateRedis(log_dir, free_port(self.master.port + 1))
        self.replica.start("--replicaof", "127.0.0.1", str(self.master.port))
        self.sentinels = []
        for _ in range(3):
            port = free_port((self.sentinels[-1][0] if self.sentinels else self.replica.port) + 1)
            self.sentinels.append((port, self.start_sentinel(port, "127.0.0.1", self.master.port)))
        self.url = ";".join(f"sentinel://127.0.0.1:{port}" for port, _ in self.sentinels)

    def fault(self):
        """SIGKILL the master and wait until the sentinels promoted the replica and it accepts writes."""
        old = self.master
        old.kill()
        wait_until(lambda: self.master_port() == self.replica.port, 30, "the sentinels to promote the replica")
        wait_until(lambda: redis.Redis(port=self.replica.port).info("replication")["role"] == "master", 10,
                   "the replica to become master")
        self.master, self.replica = self.replica, old

    def lose_messages(self, queue):
        self.master.lose_messages(queue)

    def stop(self):
        for port, proc in self.sentinels:
            _kill(proc, port)
        self.master.kill()
        self.replica.kill()


def write_rabbit_config(directory, port, addresses):
    """A RabbitMQ node's rabbitmq.conf and enabled_plugins (none) in ``directory``: it listens on
    ``port`` of each of ``addresses``."""
    listeners = "".join(f"listeners.tcp.{n} = {address}:{port}\n" for n, address in enumerate(addresses, 1))
    (directory / "rabbitmq.conf").write_text(
        f"{listeners}"
        "loopback_users = none\n"
        # Runs hold their message (acks_late) as long as they run: RabbitMQ must not close the
        # channel of a consumer that holds one longer than its default 30 minutes.
        f"consumer_timeout = {(django_settings.JOBS_MAX_TIMEOUT_SECONDS + 3600) * 1000}\n"
        "log.console = false\n")
    (directory / "enabled_plugins").write_text("[].\n")


class PrivateRabbit(Broker):
    """A RabbitMQ node of its own: node name, ports, data, logs, cookie and epmd all private."""

    kind = "rabbitmq"

    def __init__(self, base_dir, bind=()):
        """``bind``: more addresses to listen on (the core's, to the hosts of tests/chaos/hosts.py)."""
        self.base = Path(base_dir)
        self.bind = list(bind)
        self.port = free_port(PORT_BASE + 40)
        self.dist_port = free_port(self.port + 1)
        self.epmd_port = free_port(self.dist_port + 1)
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.node = f"rabbit-test-{self.port}@localhost"
        self.epmd = self.proc = None
        self.started = []  # every node process group this object started: stop() ends them all
        home = self.base / "home"
        home.mkdir(parents=True, exist_ok=True)
        cookie = home / ".erlang.cookie"
        cookie.write_text(f"scheduler-test-{self.port}")
        cookie.chmod(0o400)
        write_rabbit_config(self.base, self.port, ["127.0.0.1", *self.bind])

    def environment(self):
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin:/usr/sbin"), "HOME": str(self.base / "home"),
            "ERL_EPMD_PORT": str(self.epmd_port), "RABBITMQ_NODENAME": self.node,
            **({} if self.bind else {"RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1"}), "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port), "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.base / "log"), "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(self.base / "rabbitmq.pid"),
        }

    def start(self):
        self.kill()  # a node still booting is not left behind when a test starts another
        if self.epmd is None or self.epmd.poll() is not None:
            self.epmd = subprocess.Popen([shutil.which("epmd") or "epmd", "-port", str(self.epmd_port)], cwd=self.base,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        server = shutil.which("rabbitmq-server", path="/usr/lib/rabbitmq/bin") or "rabbitmq-server"
        with open(self.base / "server.out", "ab") as out:
            # In its own directory: a crashing node writes erl_crash.dump and MnesiaCore files there.
            self.proc = subprocess.Popen([server], env=self.environment(), cwd=self.base, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(self.proc)
        try:
            wait_until(lambda: _listens(self.port) or self.proc.poll() is not None, 90, f"RabbitMQ on {self.port}")
        finally:
            if not _listens(self.port):
                self.kill()
        if self.proc.poll() is not None:
            raise RuntimeError(f"RabbitMQ did not start: {(self.base / 'server.out').read_text()[-2000:]}")

    def kill(self):
        _kill(self.proc, self.port, self.dist_port)

    def fault(self):
        """SIGKILL the node and start it again on the same data (quorum queues keep their messages)."""
        self.kill()
        self.start()

    def stop(self):
        for proc in reversed(self.started):  # the newest holds the ports
            _kill(proc, self.port, self.dist_port)
        _kill(self.epmd, self.epmd_port)

    def lose_messages(self, queue):
        """Every message of ``queue`` gone (purged)."""
        with Connection(self.url) as connection:
            connection.default_channel.queue_purge(queue)

    def ctl(self, *args):
        """rabbitmqctl against this node; its output."""
        ctl = shutil.which("rabbitmqctl", path="/usr/lib/rabbitmq/bin") or "rabbitmqctl"
        done = subprocess.run([ctl, "-n", self.node, *args], env=self.environment(), capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout

    def empty(self, queues):
        """Purge ``queues`` (the node outlives a test: the next one starts with no message). They are
        kept, not deleted: RabbitMQ 3.10 can lose the leader of a quorum queue killed within a
        second of its creation (it never elects one after the restart), and a fault scenario kills
        the node soon after its worker starts."""
        if not _listens(self.port):
            self.start()
        with Connection(self.url) as connection:
            for name in queues:
                channel = connection.channel()
                try:
                    channel.queue_purge(name)
                except connection.channel_errors:
                    pass  # no such queue
                finally:
                    channel.close()

    def declare(self, queue):
        """Declare ``queue`` as the service does (a quorum queue)."""
        with Connection(self.url) as connection:
            Queue(queue, Exchange(queue), queue, queue_arguments={"x-queue-type": "quorum"}).bind(
                connection.default_channel).declare()

def start(kind, directory):
    if kind == "redis":
        server = PrivateRedis(directory)
        server.start()
        return server
    return PrivateSentinel(directory)


def use(server, settings, **options):
    """Point this test process at ``server``: Django's settings and a fresh Celery app made current
    (publishing and queue_depth use the current app). Returns a function that undoes it.
    ``options``: more arguments of the broker's settings (``Broker.celery_settings``)."""
    for name, value in server.celery_settings(**options).items():
        setattr(settings, name, value)
    previous = current_app._get_current_object()
    app = Celery("scheduler_site")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.set_current()
    app.set_default()

    def undo():
        from jobs.execution import publishing

        publishing.forget()
        previous.set_current()
        previous.set_default()
        app.close()
        # kombu keeps connection pools per broker URL for the whole process, with the queues each
        # connection declared: a later test on the same node must declare its queues again.
        pools.reset()
        # The previous app keeps the producer pool it took from kombu's, closed just now: a later
        # task.delay() in this process would meet "Acquire on closed pool". It takes a new one.
        previous.amqp._producer_pool = None

    return undo


def pytest_generate_tests(metafunc):
    if "broker" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("brokers")
        # Redis unless a test says which: the suite's default broker. The scenarios where the broker is
        # the fault or carries the guarantee name all three (pytest.mark.brokers(*BROKERS)).
        kinds = marker.args if marker else ("redis",)
        if TEST_BROKER != "redis":
            kinds = (TEST_BROKER,)
        metafunc.parametrize("broker", kinds, indirect=True)


def leave_out_other_brokers_tests(config, items):
    """Under TEST_BROKER=rabbitmq, the tests marked ``redis_only`` are left out (deselected)."""
    if TEST_BROKER == "redis":
        return
    other = [item for item in items if item.get_closest_marker("redis_only")]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


@pytest.fixture(scope="session")
def rabbit_node(tmp_path_factory):
    """One RabbitMQ node for the session (it takes ~8 s to start); each test empties its queues."""
    node = PrivateRabbit(tmp_path_factory.mktemp("rabbitmq"))
    node.start()
    node.declare(django_settings.JOBS_DEFAULT_QUEUE)
    time.sleep(2)  # a settling pause, not a timing assert: see PrivateRabbit.empty
    node.queues_seen = set()
    yield node
    node.stop()


@pytest.fixture
def broker(request, settings, tmp_path_factory):
    """A private broker of the kind the test is parametrised with, this process pointed at it."""
    kind = getattr(request, "param", TEST_BROKER)  # TEST_BROKER: asked for by tests/conftest.py's processes
    if kind == "rabbitmq":
        server = request.getfixturevalue("rabbit_node")
        server.empty(server.queues_seen | {settings.JOBS_DEFAULT_QUEUE})
    else:
        server = start(kind, tmp_path_factory.mktemp(kind))
    undo = use(server, settings)
    if kind == "rabbitmq":
        server.queues_seen |= set(current_app.amqp.queues)
    yield server
    if kind == "rabbitmq":
        server.queues_seen |= set(current_app.amqp.queues)
    undo()
    if kind == "rabbitmq":
        server.empty(server.queues_seen)
    else:
        server.stop()
