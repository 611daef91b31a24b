"""Several hosts: workers and schedulers on hosts of their own (network namespaces, tests/chaos/hosts.py),
cut off, healed, and out of time.

The core host (the root namespace) holds the test's PostgreSQL and broker; worker hosts and
scheduler hosts reach them across the bridge. A cut drops every packet the host sends. Each
scenario prints a line starting ``HOSTS`` with what it measured (docs/operations/deployment.md quotes them);
the times compared are the test's own clock against stamps the jobs themselves wrote, never the
rows under test.
"""

import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from jobs import lifecycle
from jobs.coordination import leases
from jobs.models import AttemptOutcome, JobAttempt, RunStatus

from ..brokers import PrivateRabbit, PrivateRedis, use
from ..conftest import require, wait_for
from . import invariants
from .conftest import (
    every_second_job,
    make_job,
    pause_and_check,
    postgres_on_the_core,
    since,
    ticks,
    wait_for_leader,
    wait_for_runs,
)
from .hosts import Network, can_make_namespaces, clock_shifted

pytestmark = pytest.mark.brokers("redis")  # a private broker on the core host, reachable from the others

RERUN_WITHIN_SECONDS = 20  # the promise: a cut-off worker's run runs elsewhere within this


@pytest.fixture
def network():
    require(can_make_namespaces(), "cannot create network namespaces (needs root and iproute2)")
    with Network() as network:
        yield network


@pytest.fixture
def core_postgres(transactional_db, network):
    with postgres_on_the_core(network) as server:
        yield server


@pytest.fixture
def broker(request, core_postgres, network, settings, tmp_path_factory):
    """The suite's ``broker``, here on the core host: a private Redis (or, TEST_BROKER=rabbitmq, a
    RabbitMQ node of the test's own) also listening on the bridge."""
    if request.param == "rabbitmq":
        server = PrivateRabbit(tmp_path_factory.mktemp("rabbitmq"), bind=[str(network.core_address)])
    else:
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
    # The cut-off attempt stopped by itself, without hearing from anyone: 3 s of silence (the broker
    # probed meanwhile), then the kill; the leader's verdict comes after the 4 s lost window, and the
    # rerun later still. Measured: no overlap; the margin is for a loaded machine.
    assert fenced_after < 5
    assert overlap < 2
    print(f"\nHOSTS cut off: rerun on host {other_name} {rerun_after:.1f} s after the cut; host {cut_name} "
          f"fenced its attempt {fenced_after:.1f} s after the cut; overlap of the two executions "
          f"{max(overlap, 0):.1f} s (gap {max(-overlap, 0):.1f} s)")


def lateness(job, ledger):
    """The seconds from each slot to the start of its run's execution (the ledger's stamp, written
    by the worker): the largest is the longest gap a failure opened."""
    slot_of = {str(pk): slot for pk, slot in job.runs.values_list("pk", "scheduled_for")}
    return max(float(stamp) - slot_of[key.split(":")[0]].timestamp()
               for kind, key, stamp in ledger.lines("start") if key.split(":")[0] in slot_of)


def log_lines_after(proc, moment, text):
    """The lines of ``proc``'s log holding ``text`` stamped after ``moment`` (an epoch)."""
    found = []
    for line in log_of(proc).splitlines():
        if text in line and line.startswith("["):
            stamp = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if stamp > moment:
                found.append(line)
    return found


@pytest.mark.timeout(120)
def test_the_leaders_host_cut_off_a_standby_on_another_host_leads_and_no_slot_is_missed_or_run_twice(
        network, processes, ledger):
    scheduler_hosts = {"a": network.add_host("a"), "d": network.add_host("d")}
    processes.worker()  # on the core host
    beats = {"a": processes.beat(name="a", host=scheduler_hosts["a"])}
    assert wait_for_leader(timeout=30) == "a"
    beats["d"] = processes.beat(name="d", host=scheduler_hosts["d"])
    job = every_second_job("leader-cut-off", ledger)
    wait_for_runs(job, 3, timeout=30)
    epoch = leases.state(settings.JOBS_LEADER_KEY)["epoch"]

    scheduler_hosts["a"].cut()
    cut_at, cut_wall = time.monotonic(), time.time()
    cut_moment = job.runs.latest("scheduled_for").scheduled_for
    assert wait_for_leader(other_than="a", timeout=10) == "d"  # the promise: within 10 s
    failover = since(cut_at)
    wait_for_runs(job, 3, after=cut_moment)
    scheduler_hosts["a"].heal()
    # It steps down: while cut off, when a renewal fails on its broken connection, or back, when it
    # finds its epoch taken over (at its renewal, or at the commit of a tick it was in).
    step_down = wait_for(lambda: log_lines_after(beats["a"], cut_wall, "scheduler a lost the leadership"),
                         timeout=30, message="the cut-off leader to step down")[0]
    stepped_down = datetime.strptime(step_down[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp() - cut_wall
    time.sleep(3)  # a TTL after the heal: time enough for the old leader to try to tick again

    state = leases.state(settings.JOBS_LEADER_KEY)
    assert (state["holder"], state["epoch"]) == ("d", epoch + 1)  # one takeover, never taken back
    assert not log_lines_after(beats["a"], cut_wall, "dispatched")  # no tick of the old leader committed
    slots, verdict = pause_and_check(job, ledger)
    assert verdict.duplicates == 0
    longest_gap = lateness(job, ledger)
    assert longest_gap < failover + 5  # the failover, then the standby's catch-up tick and a worker
    print(f"\nHOSTS leader cut off: host d led {failover:.1f} s after the cut; the longest a slot waited for "
          f"its execution {longest_gap:.1f} s; {slots.expected} slots, {slots.seen} ran once, "
          f"{verdict.duplicates} twice; the old leader stepped down {stepped_down:.1f} s after the cut")


def flap(host, seconds, down=2.0, up=3.0):
    """Cut ``host`` off for ``down`` seconds and let it back for ``up``, for ``seconds``; how many cuts."""
    cuts, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        host.cut()
        cuts += 1
        time.sleep(down)
        host.heal()
        time.sleep(up)
    return cuts


@pytest.mark.timeout(150)
def test_a_flapping_link_to_a_worker_host_loses_nothing_runs_nothing_twice_and_leaves_nothing_stuck(
        network, processes, ledger):
    worker_hosts = {"b": network.add_host("b"), "c": network.add_host("c")}
    for host in worker_hosts.values():
        processes.worker(concurrency=2, name="worker", host=host)
    processes.beat()
    job = make_job("flapping", kwargs={"path": ledger.path, "seconds": 0.5},
                   schedule={"type": "interval", "every_seconds": 1})
    wait_for_runs(job, 3, timeout=30)

    cuts = flap(worker_hosts["b"], seconds=40)
    slots, verdict = pause_and_check(job, ledger)
    ran_on = {worker.split("@")[1] for worker in job.runs.values_list("attempts__worker", flat=True)}
    lost = job.runs.filter(attempts__outcome=AttemptOutcome.LOST).count()
    assert ran_on == {"host-b", "host-c"}  # the flapping host kept taking runs between its cuts
    assert verdict.duplicates == 0 and lost == 0
    print(f"\nHOSTS flapping link: host b cut {cuts} times (2 s down, 3 s up) over 40 s; {slots.expected} slots, "
          f"{slots.seen} ran once, {verdict.duplicates} twice, {lost} attempts lost; "
          f"{job.runs.filter(attempts__worker='worker@host-b').count()} runs on host b")


SKEW_SECONDS = 120


@pytest.mark.timeout(120)
def test_workers_two_minutes_ahead_and_behind_lose_no_healthy_run_and_every_time_is_the_databases(
        network, processes, ledger):
    skews = {"b": SKEW_SECONDS, "c": -SKEW_SECONDS}
    for name, skew in skews.items():
        processes.worker(concurrency=2, name="worker", host=network.add_host(name), **clock_shifted(skew))
    processes.beat()
    # Each run heartbeats for 6 s, past the 4 s after which a silent attempt is lost: a heartbeat
    # aged on a worker's clock would make every one of them lost.
    job = make_job("skewed", kwargs={"path": ledger.path, "seconds": 6})
    began = timezone.now()
    runs = [lifecycle.create_run(job) for _ in range(6)]
    verdict = invariants.check(invariants.runs_of(job), ledger, terminal_within=90)
    ended = timezone.now()

    assert verdict.succeeded == len(runs) and verdict.duplicates == 0
    attempts = list(JobAttempt.objects.filter(run__job=job))
    assert {a.outcome for a in attempts} == {AttemptOutcome.SUCCEEDED} and len(attempts) == len(runs)
    assert {a.worker for a in attempts} == {"worker@host-b", "worker@host-c"}
    # The workers' clocks really were off: the stamps they wrote in the ledger, against their claims.
    started = {f"{a.run_id}:{a.number}": a for a in attempts}
    offsets = {a.worker: [] for a in attempts}
    for _, key, stamp in ledger.lines("start"):
        offsets[started[key].worker].append(float(stamp) - started[key].started_at.timestamp())
    assert all(abs(offset - SKEW_SECONDS) < 10 for offset in offsets["worker@host-b"]), offsets
    assert all(abs(offset + SKEW_SECONDS) < 10 for offset in offsets["worker@host-c"]), offsets
    # Every time the rows hold is the database's: within the test's own window, whichever host wrote it.
    window = (began - timedelta(seconds=2), ended + timedelta(seconds=2))
    for run in invariants.runs_of(job):
        stamps = [run.started_at, run.finished_at, run.heartbeat_at]
        assert all(window[0] <= stamp <= window[1] for stamp in stamps), (run.pk, stamps)
    for attempt in attempts:
        stamps = [attempt.started_at, attempt.finished_at, attempt.heartbeat_at]
        assert all(window[0] <= stamp <= window[1] for stamp in stamps), (attempt.pk, stamps)
    print(f"\nHOSTS clock skew: workers {SKEW_SECONDS} s ahead and {SKEW_SECONDS} s behind ran {len(runs)} runs "
          f"of 6 s, heartbeating past the 4 s lost window: {verdict.succeeded} succeeded, none lost")
