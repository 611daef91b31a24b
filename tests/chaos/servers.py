"""Private servers a chaos test may kill, flush, stop and start: a redis-server and a PostgreSQL
cluster of the test's own, on ports from TEST_PORT_BASE up, never the shared ones."""

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

# Sessions running suites side by side set their own base.
PORT_BASE = int(os.environ.get("TEST_PORT_BASE", "6390"))


def free_port(start=None):
    start = start or PORT_BASE
    for port in range(start, start + 200):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port in {start}..{start + 199} for a private server")


def postgres_bindir():
    """Where initdb and pg_ctl are (``pg_config --bindir``), or None."""
    if shutil.which("pg_config") is None:
        return None
    found = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip())
    return found if (found / "initdb").exists() and (found / "pg_ctl").exists() else None


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own: ``initdb`` in a temporary folder, a spare port, trust
    authentication on 127.0.0.1, no fsync (it lives for one test). As root, the server runs
    as the ``postgres`` user, as PostgreSQL insists. ``listen``: more addresses to listen on, and
    ``trusted``: networks (CIDR) whose clients it lets in (the hosts of tests/chaos/hosts.py);
    ``settings``: more server settings ({name: value}, each passed as ``-c name=value``);
    ``port``: its port (a spare one from TEST_PORT_BASE + 100 by default)."""

    DATABASE = "scheduler"

    def __init__(self, bindir, listen=(), trusted=(), settings=None, port=None):
        self.bindir = bindir
        self.listen = ",".join(["127.0.0.1", *listen])
        self.trusted = trusted
        self.settings = dict(settings or {})
        self.port = port or free_port(PORT_BASE + 100)
        self.folder = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        self.data = self.folder / "data"
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.folder, self.user, self.user)

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.DATABASE}"

    def _run(self, tool, *args, timeout=60):
        done = subprocess.run([str(self.bindir / tool), *args], user=self.user, capture_output=True, text=True,
                              timeout=timeout, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def create(self, copy_of=None):
        """initdb, start, and a database holding the schema (and rows) of the database ``copy_of``
        (a Django connection), or an empty one without it (the caller migrates it)."""
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.writelines(f"host all all {network} trust\n" for network in self.trusted)
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", self.DATABASE)
        if copy_of is None:
            return
        source = copy_of.settings_dict
        dump = subprocess.run(
            ["pg_dump", "--no-owner", "--no-privileges", "-h", source["HOST"] or "127.0.0.1",
             "-p", str(source["PORT"] or 5432), "-U", source["USER"] or "postgres", source["NAME"]],
            capture_output=True, text=True, timeout=60, check=True).stdout
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port), "-U",
                        "postgres", "-d", self.DATABASE], input=dump, capture_output=True, text=True, timeout=60,
                       check=True)

    def start(self):
        # fsync off: the machine does not crash, only the server does, and what a commit wrote is
        # in the kernel's cache. Commits stay synchronous: an asynchronous one is lost in a crash.
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses={self.listen} -c fsync=off "
                   "-c full_page_writes=off -c max_connections=100")
        # pg_ctl hands the options to a shell; a later -c of the same name wins over the ones above.
        options += "".join(f" -c {shlex.quote(f'{name}={value}')}" for name, value in self.settings.items())
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "server.log"), "-w",
                  "-t", "60", "start")

    def stop(self, mode="immediate"):
        """Stop the server: ``immediate`` is a crash (every backend killed, recovery at the next
        start), ``fast`` a clean shutdown."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def processes(self):
        """The pids of the server: the postmaster (postmaster.pid's first line) and its children."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                        children.append(int(entry.name))
        return [postmaster, *children]

    def freeze(self):
        """SIGSTOP every process of the server: connections stay open and statements hang, as
        across a link that drops every packet (a restart would refuse them)."""
        stopped = set()
        while running := [pid for pid in self.processes() if pid not in stopped]:
            # Again until none is left running: a backend forked while the first list was read.
            for pid in running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)

    def thaw(self):
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def destroy(self):
        with contextlib.suppress(Exception):
            self.thaw()
        with contextlib.suppress(Exception):
            if (self.data / "postmaster.pid").exists():
                self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def log(self):
        path = self.folder / "server.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""
