"""Upgrading a running service from the previous release (issue 49), in the order of
docs/operations/upgrading.md: the previous release's tree, checked out from git (the tag release-3,
else its commit), migrates a database of its own and runs its web, two workers and two beats on it
with a steady load of interval jobs; this tree's ``migrate`` runs beside them; then the workers are
rolled one at a time, the standby beat, the leader, and the web. Every slot of the load runs once
(the jobs' own ledger, against the test's clock), and the dispatch lag stays bounded."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import requests
from django.conf import settings
from django.db import connection

from .cli_support import free_port
from .conftest import PROCESS_ENV, REPO, require, wait_for

pytestmark = pytest.mark.postgres("a database of its own, made and dropped with CREATE/DROP DATABASE")

RELEASE_TAG = "release-3"
RELEASE_COMMIT = "d8a114e"  # the third round's landed state, in main's history
# The load: ten jobs with a slot every second, ten every two seconds (15 runs a second).
EVERY = {f"load-{i:02}": 1 if i < 10 else 2 for i in range(20)}
STEADY_SECONDS = 10  # of load on the old release before the migration, and again after the roll (twice that)
# Once every job has run its last slot before the end of the load, the processes go on this long (an
# execution twice would come soon after the first: a message sent again, an attempt taken over).
TAIL_SECONDS = 3
# The dispatch lag's bound. On a handover a slot waits at most for the old leader's lease to expire
# (JOBS_LEADER_TTL_SECONDS, 3 s here; a leader stopped by SIGTERM gives it back at once) and the new
# leader's next tick; the rest is room for a 2-core machine starting Django processes beside the load.
# A bound, not a benchmark: an upgrade that loses the schedule for a while lands far beyond it.
LAG_P99_BOUND = float(PROCESS_ENV["JOBS_LEADER_TTL_SECONDS"]) + 7


def git(*args, check=True):
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=120, check=check)


@pytest.fixture
def old_tree(tmp_path_factory):
    """The previous release's files in a git worktree of their own, removed at the end."""
    found = [ref for ref in (RELEASE_TAG, RELEASE_COMMIT)
             if git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False).returncode == 0]
    require(found, f"neither the tag {RELEASE_TAG} nor the commit {RELEASE_COMMIT} (the previous release) is in "
                   f"the repository at {REPO}: a shallow clone? fetch the history (git fetch --unshallow)")
    tree = tmp_path_factory.mktemp("previous-release") / "tree"
    git("worktree", "add", "--detach", str(tree), found[0])
    try:
        yield tree
    finally:
        git("worktree", "remove", "--force", str(tree), check=False)
        git("worktree", "prune", check=False)


@pytest.fixture
def upgrade_database():
    """A database of its own (the suite's test database has this release's schema already): its URL."""
    ours = connection.settings_dict
    name = f"{ours['NAME']}_upgrade"
    server = {"host": ours["HOST"] or "127.0.0.1", "port": ours["PORT"] or 5432, "user": ours["USER"] or "postgres",
              "password": ours["PASSWORD"] or None}

    def maintenance(sql):
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
            conn.execute(sql)

    maintenance(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    maintenance(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{server['user']}@{server['host']}:{server['port']}/{name}", {"dbname": name, **server}
    finally:
        maintenance(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Release:
    """The processes of one tree (the previous release's, or this one) on the upgrade's database."""

    def __init__(self, tree, processes, database_url, label):
        self.tree, self.processes, self.label = Path(tree), processes, label
        self.env = {"DATABASE_URL": database_url, "PYTHONPATH": str(tree)}

    def manage(self, *args):
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=self.tree, capture_output=True, text=True,
                                env=self.processes.env(**self.env), timeout=180)
        assert result.returncode == 0, f"{self.label} manage.py {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result

    def start(self, name, argv, **env):
        return self.processes.start(f"{self.label}-{name}", [sys.executable, *argv], popen={"cwd": self.tree},
                                    **self.env, **env)

    def worker(self, name):
        return self.start(name, ["-m", "celery", "-A", "scheduler_site", "worker", "-l", "INFO", "-c", "2",
                                 "-n", f"{name}@%h", "-Q", settings.JOBS_DEFAULT_QUEUE, "--without-gossip",
                                 "--without-mingle"])

    def beat(self, name):
        return self.start(name, ["-m", "celery", "-A", "scheduler_site", "beat", "-l", "INFO", "--pidfile=",
                                 "-s", str(self.processes.log_dir / f"{name}-schedule")], JOBS_NODE_NAME=name)

    def web(self, port):
        return self.start("web", ["-m", "gunicorn", "scheduler_site.wsgi", "-b", f"127.0.0.1:{port}", "--workers", "2",
                                  "--timeout", "60"], DB_CONN_MAX_AGE="0")


def logged(proc, text):
    return text in Path(proc.log_path).read_text(errors="replace")


def running(proc):
    assert proc.poll() is None, f"{proc.log_path} exited:\n{Path(proc.log_path).read_text(errors='replace')[-3000:]}"
    return True


def wait_ready(worker):
    wait_for(lambda: running(worker) and logged(worker, " ready."), timeout=60, message=f"{worker.log_path} ready")


def stop(proc, kill_after=None):
    """SIGTERM to the main process (a worker's warm shutdown, a beat giving its lease back), and it exits;
    or, ``kill_after`` seconds on, SIGKILL (a supervisor's stop timeout): whether it had to."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=kill_after or 60)
        return False
    except subprocess.TimeoutExpired:
        if kill_after is None:
            pytest.fail(f"{proc.log_path} did not exit within 60 s of SIGTERM")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return True


def leader(db):
    with psycopg.connect(**db) as conn:
        row = conn.execute("SELECT holder FROM jobs_lease WHERE name = 'scheduler:leader' AND expires_at > now()"
                           ).fetchone()
    return row[0] if row else None


def jobs_listed(url, token):
    response = requests.get(f"{url}/api/jobs/?page_size=100", headers={"Authorization": f"Token {token}"},
                            timeout=30)
    assert response.status_code == 200, response.text[:2000]
    return sorted(job["name"] for job in response.json()["results"])


def wait_web(proc, url, token):
    def answers():
        running(proc)
        with contextlib.suppress(requests.ConnectionError):
            return jobs_listed(url, token)
        return None

    return wait_for(answers, timeout=60, message=f"the web at {url}")


MADE_MID_UPGRADE = "made-mid-upgrade"


def make_through(url, token):
    """A job, a calendar, a limit, a channel and a rule, made through the web at ``url``: each answer's
    status and the start of its body."""
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"

    def post(path, body):
        response = session.post(f"{url}/api/{path}/", json=body, timeout=30)
        answers[path] = (response.status_code, response.text[:300])
        return response.json().get("id") if response.status_code == 201 else None

    answers = {}
    job = post("jobs", {"name": MADE_MID_UPGRADE, "kind": "callable", "target": "builtin.noop", "enabled": False,
                        "schedule": {"type": "interval", "every_seconds": 3600}})
    post("calendars", {"name": "office", "dates": ["2026-12-31"]})
    post("limits", {"key": "warehouse", "max_running": 2})
    channel = post("channels", {"name": "ops", "kind": "email", "config": {"recipients": ["ops@example.com"]}})
    post("rules", {"channel": channel, "events": ["failed"], "scope": "job", "job": job})
    return answers


def slot_of(key):
    """(job id, slot) of an idempotency key, "<job id>:<slot in UTC, ISO 8601>"."""
    job_id, slot = key.split(":", 1)
    return int(job_id), datetime.fromisoformat(slot)


def ran_since(ledger, moment):
    """Whether a job's ledger ("key <idempotency key> <attempt> <run id>" lines) has a slot after ``moment``."""
    return any(slot_of(line.split()[1])[1] > moment for line in ledger.read_text().splitlines())


def test_a_running_service_upgrades_from_the_previous_release_under_load(upgrade_database, old_tree, processes,
                                                                          tmp_path):
    url, db = upgrade_database
    old = Release(old_tree, processes, url, "old")
    new = Release(REPO, processes, url, "new")
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    for name in EVERY:
        (ledgers / name).touch()

    # 1. The previous release's database, its user and token, and the load (jobs as code, its manage.py).
    old.manage("migrate", "--no-input")
    old.manage("createsuperuser", "--no-input", "--username", "upgrader", "--email", "upgrader@example.com")
    token = old.manage("tokens", "create", "upgrader").stdout.strip().splitlines()[-1]
    jobs_file = tmp_path / "load.yaml"
    jobs_file.write_text("jobs:\n" + "".join(
        f"- {{name: {name}, kind: callable, target: test.keys, kwargs: {{path: '{ledgers / name}'}}, "
        f"schedule: {{type: interval, every_seconds: {every}}}}}\n" for name, every in EVERY.items()))
    old.manage("jobs", "apply", str(jobs_file))

    # 2. Its web, two workers, a leading beat and a standby.
    port = free_port()
    web_url = f"http://127.0.0.1:{port}"
    old_web = old.web(port)
    workers = [old.worker("w1"), old.worker("w2")]
    beats = {"old-a": old.beat("old-a")}
    wait_for(lambda: running(beats["old-a"]) and leader(db) == "old-a", timeout=60, message="old-a leading")
    beats["old-b"] = old.beat("old-b")
    for worker in workers:
        wait_ready(worker)
    assert wait_web(old_web, web_url, token) == sorted(EVERY)
    wait_for(lambda: running(beats["old-b"]) and logged(beats["old-b"], "beat: Starting"), timeout=60,
             message="old-b started")
    load_from = datetime.now(UTC)
    time.sleep(STEADY_SECONDS)

    # 3. This release's migrate beside the old processes, which go on a while on the new schema, and the
    # old web makes rows there without the new columns (the database fills in their defaults).
    # (A migration PostgreSQL ended for a deadlock with the service runs again: jobs/management/commands/migrate.py.)
    deadlocks = new.manage("migrate", "--no-input").stderr.count("ended by a deadlock")
    made = make_through(web_url, token)
    assert {path: status for path, (status, _) in made.items()} == dict.fromkeys(
        ("jobs", "calendars", "limits", "channels", "rules"), 201), made
    time.sleep(5)
    for process in (*workers, *beats.values(), old_web):
        running(process)

    # Roll the workers one at a time (warm shutdown, then this release's in its place) ...
    for index, worker in enumerate(workers):
        stop(worker)
        workers[index] = new.worker(f"w{index + 1}")
        wait_ready(workers[index])
    # ... the standby beat, then the leader (the new one takes over), then a second new beat. (Whichever
    # leads now: a migration holding the jobs' lock past the lease may have passed it to the standby.)
    # The previous release's beat may hang on SIGTERM (tests/test_beat_shutdown.py): killed 10 s on.
    leading = wait_for(lambda: leader(db), timeout=30, message="a beat leading")
    [standby] = set(beats) - {leading}
    killed = [name for name in (standby,) if stop(beats.pop(name), kill_after=10)]
    beats["new-b"] = new.beat("new-b")
    wait_for(lambda: running(beats["new-b"]) and logged(beats["new-b"], "beat: Starting"), timeout=60,
             message="new-b started")
    killed += [name for name in (leading,) if stop(beats.pop(name), kill_after=10)]
    wait_for(lambda: running(beats["new-b"]) and leader(db) == "new-b", timeout=30, message="new-b leading")
    beats["new-a"] = new.beat("new-a")
    # ... and the web: this release's answers the previous release's token with the same jobs.
    stop(old_web)
    port = free_port()
    new_web = new.web(port)
    assert wait_web(new_web, f"http://127.0.0.1:{port}", token) == sorted([*EVERY, MADE_MID_UPGRADE])

    # 4. The load goes on, on this release alone, then everything stops (the fixture, by process group).
    time.sleep(2 * STEADY_SECONDS)
    load_until = datetime.now(UTC)
    wait_for(lambda: all(ran_since(ledgers / name, load_until - timedelta(seconds=every))
                         for name, every in EVERY.items()), timeout=60, message="the last slots of the load")
    time.sleep(TAIL_SECONDS)
    for process in (*workers, *beats.values(), new_web):
        running(process)
    processes.stop_all()

    # 5. Every slot of each job between load_from and load_until ran, once: its ledger's keys, one line
    # an execution, make a slot every EVERY seconds, the first and last within a step of the two ends.
    executions = {name: Counter(line.split()[1] for line in (ledgers / name).read_text().splitlines())
                  for name in EVERY}
    twice = {name: [key for key, count in keys.items() if count > 1] for name, keys in executions.items()}
    assert not any(twice.values()), f"slots executed more than once: {twice}"
    runs = 0
    for name, every in EVERY.items():
        step = timedelta(seconds=every)
        slots = sorted(slot for _, slot in map(slot_of, executions[name]) if load_from <= slot <= load_until)
        assert slots, f"{name}: no slot ran between {load_from} and {load_until}"
        gaps = [(a, b) for a, b in zip(slots, slots[1:], strict=False) if b - a != step]
        assert not gaps, f"{name} (every {every} s): slots lost between {gaps}"
        assert slots[0] - load_from < step and load_until - slots[-1] < step, (
            f"{name}: slots lost at an end: {slots[0]}..{slots[-1]} for {load_from}..{load_until}")
        runs += len(slots)

    # The dispatch lag: a run's start after its slot, over the runs of the load's slots (the runs table).
    with psycopg.connect(**db) as conn:
        lags = sorted(lag for (lag,) in conn.execute(
            "SELECT EXTRACT(EPOCH FROM started_at - scheduled_for)::float FROM jobs_jobrun"
            " WHERE scheduled_for BETWEEN %s AND %s AND started_at IS NOT NULL", [load_from, load_until]))
    # Each release's leader dispatched a share of the load, with its own code: this release's says how many
    # runs it held for their slot (dispatching ahead), the previous one's did not know of it.
    logs = {Path(proc.log_path).name.rsplit("-", 1)[0]: Path(proc.log_path).read_text(errors="replace")
            for proc in processes.started}
    assert re.search(r"dispatched \d+ runs \(\d+ waiting", logs[f"old-{leading}"])
    assert "held for their slot" in logs["new-new-b"] and "held for their slot" not in logs[f"old-{leading}"]
    assert len(lags) == runs, f"{runs} slots executed, {len(lags)} runs started"
    p99 = lags[int(0.99 * (len(lags) - 1))]
    print(f"upgrade under load: {runs} runs over {(load_until - load_from).total_seconds():.0f} s, dispatch lag "
          f"p50 {lags[len(lags) // 2]:.3f} s, p99 {p99:.3f} s, max {lags[-1]:.3f} s; old beats killed after "
          f"SIGTERM: {killed or 'none'}; migrations run again after a deadlock: {deadlocks}")
    assert p99 <= LAG_P99_BOUND, f"dispatch lag p99 {p99:.1f} s over {LAG_P99_BOUND} s"
