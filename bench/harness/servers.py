"""Servers of the benchmark's own, for the benchmarks whose readings must be theirs alone on a
machine shared with other work (bench/burst.py, bench/capacity.py): a PostgreSQL cluster and a
redis-server or RabbitMQ node (tests/chaos/servers.py, tests/brokers.py), each ended by PID when
the ``Servers`` closes; and the ``Observer``, a connection of a role of its own whose statements,
commits and backend CPU are left out of the readings."""

import contextlib
import subprocess
import tempfile
from pathlib import Path

from harness import readings


class Servers(contextlib.ExitStack):
    """A private PostgreSQL (``pg_settings``, on ``pg_port``) and broker (``broker``: redis or
    rabbitmq; Redis on ``broker_port``)."""

    def __init__(self, pg_settings, pg_port, broker="redis", broker_port=None):
        super().__init__()
        self.pg_settings, self.pg_port = pg_settings, pg_port
        self.broker_name, self.broker_port = broker, broker_port
        self.folder = Path(self.enter_context(tempfile.TemporaryDirectory(prefix="bench-servers-")))

    def start(self):
        from tests.brokers import PrivateRabbit, PrivateRedis
        from tests.chaos.servers import PrivatePostgres, postgres_bindir

        bindir = postgres_bindir()
        if bindir is None:
            raise SystemExit("no PostgreSQL server binaries (pg_config --bindir): install postgresql-15")
        shared = Path(subprocess.run(["pg_config", "--sharedir"], capture_output=True, text=True).stdout.strip())
        if not (shared / "extension" / "pg_stat_statements.control").exists():
            raise SystemExit("pg_stat_statements is missing: install postgresql-contrib-15 (or Debian's postgresql-15)")
        self.pg = PrivatePostgres(bindir, settings=self.pg_settings, port=self.pg_port)
        self.callback(self.pg.destroy)
        self.pg.create()
        if self.broker_name == "redis":
            self.broker = PrivateRedis(self.folder, port=self.broker_port)
        else:
            self.broker = PrivateRabbit(self.folder / "rabbitmq")
        self.callback(self.broker.stop)
        self.broker.start()
        return self

    def pg_ticks(self, leave_out):
        return sum(readings.cpu_ticks(p) for p in self.pg.processes() if p not in leave_out)

    def broker_ticks(self):
        return readings.tree_ticks(self.broker.proc.pid)


class Observer:
    """Readings of the private PostgreSQL through a connection of the superuser role ``observer``
    (made here), with pg_stat_statements and pg_walinspect."""

    def __init__(self, servers):
        import psycopg

        self.servers = servers
        url = servers.pg.url
        with psycopg.connect(url.replace("/scheduler", "/postgres"), autocommit=True) as admin:
            admin.execute("CREATE ROLE observer SUPERUSER LOGIN")
        self.conn = psycopg.connect(url.replace("postgres@", "observer@"), autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        self.pid, self.userid, self.dbid = self.conn.execute(
            "SELECT pg_backend_pid(), (SELECT oid FROM pg_roles WHERE rolname = current_user), "
            "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
        self.transactions = 3  # the role's, the extension's, the oids'
        servers.callback(self.conn.close)

    def query(self, sql, params=None):
        self.transactions += 1
        return self.conn.execute(sql, params).fetchall()

    def execute(self, sql):
        self.transactions += 1
        self.conn.execute(sql)

    def cpu(self, processes):
        """CPU ticks now: {name: ticks} for ``processes`` ({name: pid}; "worker" is split into its
        parent and its pool), PostgreSQL and the broker."""
        found = {"PostgreSQL": self.servers.pg_ticks({self.pid}), "redis-server": self.servers.broker_ticks()}
        for name, pid in processes.items():
            if name == "worker":
                parent = readings.own_ticks(pid)
                found["worker parent"] = parent
                found["worker pool"] = readings.tree_ticks(pid) - parent
            else:
                found[name] = readings.tree_ticks(pid)
        return found

    def wal_bytes(self, before, after):
        """The WAL written between two readings (each with its ``lsn``)."""
        return float(self.query("SELECT pg_wal_lsn_diff(%s, %s)", [after["lsn"], before["lsn"]])[0][0])

    def wal_by_kind(self, before, after):
        """The WAL between two readings by kind of record (Heap/UPDATE, Btree/INSERT_LEAF...):
        [(kind, records, bytes with full-page images)], most bytes first (pg_walinspect)."""
        return self.query(
            'SELECT "resource_manager/record_type", count, combined_size FROM pg_get_wal_stats(%s, %s, true) '
            "WHERE count > 0 ORDER BY combined_size DESC", [before["lsn"], after["lsn"]])

    def wal_by_relation(self, before, after):
        """The WAL between two readings by the relation of each record's first block and the record's
        kind: [(relation, kind, records, bytes with full-page images)], most bytes first; a record
        with no block (a commit) has no relation."""
        return self.query(
            "SELECT COALESCE(c.relname, r.rel, '-'), r.kind, count(*), sum(r.record_length) FROM ("
            "  SELECT substring(block_ref from 'rel [0-9]+/[0-9]+/([0-9]+)') AS rel, record_length,"
            "         resource_manager || '/' || record_type AS kind"
            "  FROM pg_get_wal_records_info(%s, %s)) AS r "
            "LEFT JOIN pg_class AS c ON c.relfilenode::text = r.rel "
            "GROUP BY 1, 2 ORDER BY 4 DESC", [before["lsn"], after["lsn"]])

    def connections(self):
        return self.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                          "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")[0][0]

