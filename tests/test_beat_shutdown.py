"""A beat stopped with SIGTERM (an upgrade's roll, systemd's stop) exits and gives its lease back, even
when the signal comes while its tick waits in a query. Celery's handler closes the scheduler from the
interrupted frame: the lease's release, a query on the same connection, waited for that connection's
lock for ever (1 in 6 stops of the previous release's leader under load, found by tests/test_upgrade.py)."""

import signal
import time

import psycopg
from django.db import connection

from jobs.scheduling.leader import current_leader

from .conftest import wait_for

# Long enough that a lease not given back is still held when the test looks (a renewal every TTL / 3).
TTL_SECONDS = 30


def test_a_leader_stopped_while_its_tick_waits_in_a_query_exits_and_gives_its_lease_back(processes):
    beat = processes.beat("stopped", JOBS_LEADER_TTL_SECONDS=TTL_SECONDS)
    wait_for(lambda: (current_leader() or {}).get("node") == "stopped", timeout=60, message="the beat leading")

    ours = connection.settings_dict
    with psycopg.connect(dbname=ours["NAME"], host=ours["HOST"] or "127.0.0.1", port=ours["PORT"] or 5432,
                         user=ours["USER"] or "postgres", password=ours["PASSWORD"] or None) as blocker:
        blocker.execute("LOCK TABLE jobs_job IN ACCESS EXCLUSIVE MODE")  # every tick reads the jobs
        wait_for(lambda: waiting_on_a_lock(blocker), timeout=10, message="the tick waiting on the jobs' lock")
        processes.kill(beat, signal.SIGTERM, group=False)
        time.sleep(1)  # the handler runs meanwhile, inside the waiting query
    # The lock is given up with the transaction: the interrupted query ends, and beat goes on out.

    wait_for(lambda: beat.poll() is not None, timeout=20, message="the beat exiting after SIGTERM")
    assert current_leader() is None


def waiting_on_a_lock(blocker):
    return blocker.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND datname = current_database()").fetchone()[0] > 0
