"""Several hosts: workers and schedulers on hosts of their own (network namespaces, tests/chaos/hosts.py),
cut off, healed, and out of time.

The core host (the root namespace) holds the test's PostgreSQL and broker; worker hosts and
scheduler hosts reach them across the bridge. A cut drops every packet the host sends. Each
scenario prints a line starting ``HOSTS`` with what it measured (docs/DEPLOYMENT.md quotes them);
the times compared are the test's own clock against stamps the jobs themselves wrote, never the
rows under test.
"""

import time
from pathlib import Path

import pytest

from jobs import lifecycle
from jobs.models import AttemptOutcome, RunStatus

from ..brokers import PrivateRedis, use
from ..conftest import require, wait_for
from .conftest import make_job, private_postgres_bindir, serving_the_test_database, ticks
from .hosts import Network, can_make_namespaces
from .servers import PrivatePostgres

pytestmark = pytest.mark.brokers("redis")  # a private Redis on the core host, reachable from the others

RERUN_WITHIN_SECONDS = 20  # the promise: a cut-off worker's run runs elsewhere within this


@pytest.fixture
def network():
    require(can_make_namespaces(), "cannot create network namespaces (needs root and iproute2)")
    with Network() as network:
        yield network


@pytest.fixture
def core_postgres(transactional_db, network):
    server = PrivatePostgres(private_postgres_bindir(), listen=[str(network.core_address)],
                             trusted=[str(network.subnet)])
    with serving_the_test_database(server):
        yield server


@pytest.fixture
def broker(core_postgres, network, settings, tmp_path_factory):
    """The suite's ``broker``, here on the core host: a private Redis also listening on the bridge."""
    server = PrivateRedis(tmp_path_factory.mktemp("redis"), bind=[str(network.core_address)])
    server.start()
    undo = use(server, settings)
    yield server
    undo()
    server.stop()


def ticking_job(name, path, count):
    """A command job writing "<attempt> <epoch>" every 0.25 s, ``count`` times."""
    target = f'for i in $(seq 1 {count}); do echo "$JOB_ATTEMPT $(date +%s.%N)" >> {path}; sleep 0.25; done'
    return make_job(name, kind="command", target=target, timeout_seconds=120)


def log_of(proc):
    return Path(proc.log_path).read_text(errors="replace")


@pytest.mark.timeout(150)
def test_a_worker_host_cut_off_mid_run_is_fenced_its_run_runs_elsewhere_and_its_late_outcome_is_refused(
        network, processes, ticks_file):
    hosts = {name: network.add_host(name) for name in ("b", "c")}
    workers = {name: processes.worker(concurrency=1, name="worker", host=host) for name, host in hosts.items()}
    processes.beat()  # the leader, on the core host
    count = 48  # 12 s of work: the rerun does it all again
    job = ticking_job("cut-off", ticks_file, count)
    run = lifecycle.create_run(job)
    wait_for(lambda: len(ticks(ticks_file, 1)) >= 4, timeout=60, message="the first attempt to tick")
    first = run.attempts.get(number=1)
    cut_name = first.worker.split("@")[1].removeprefix("host-")
    other_name = next(name for name in hosts if name != cut_name)

    hosts[cut_name].cut()
    cut_at = time.time()
    second = wait_for(lambda: run.attempts.filter(number=2).first(), timeout=RERUN_WITHIN_SECONDS,
                      message=f"the run to be run again within {RERUN_WITHIN_SECONDS} s of the cut")
    rerun_after = time.time() - cut_at
    wait_for(lambda: ticks(ticks_file, 2) and time.time() - max(ticks(ticks_file, 1)) > 2, timeout=20,
             message="the cut-off attempt to stop ticking while the rerun ticks")
    fenced_after = max(ticks(ticks_file, 1)) - cut_at
    overlap = max(ticks(ticks_file, 1)) - min(ticks(ticks_file, 2))

    hosts[cut_name].heal()
    wait_for(lambda: f"run {run.pk} attempt 1: outcome refused" in log_of(workers[cut_name]), timeout=40,
             message="the healed host's late outcome to arrive, and be refused")
    wait_for(lambda: run.__class__.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), timeout=40,
             message="the rerun to succeed")

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.worker, first.outcome) == (f"worker@host-{cut_name}", AttemptOutcome.LOST)
    assert (second.worker, second.outcome) == (f"worker@host-{other_name}", AttemptOutcome.SUCCEEDED)
    assert "stopped the attempt itself" not in first.error  # what stands is the leader's verdict
    assert first.pid != second.pid
    assert len(ticks(ticks_file, 1)) < count and len(ticks(ticks_file, 2)) == count
    assert fenced_after < 10  # the fence (3 s of silence), the broker probe (2 s), the kill
    # The cut-off attempt stopped by itself, without hearing from anyone: it ticked on for a bounded while.
    assert overlap < 5
    print(f"\nHOSTS cut off: rerun on host {other_name} {rerun_after:.1f} s after the cut; host {cut_name} "
          f"fenced its attempt {fenced_after:.1f} s after the cut; overlap of the two executions "
          f"{max(overlap, 0):.1f} s (gap {max(-overlap, 0):.1f} s)")
