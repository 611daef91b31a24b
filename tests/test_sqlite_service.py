"""The embedded default, proven: the quick start's whole service (``scripts/quickstart.sh`` in a copy of
the checkout: web, worker, beat and Flower on SQLite and a Redis of its own) runs a cron job, an interval
job, a run now, a retry, a timeout and a workflow, as a user sees them through the REST API.

It runs in the SQLite pass of scripts/test.sh (the ``sqlite_service`` marker, tests/conftest.py): the
service's database is its own SQLite file, whatever the pass's database."""

import os
import subprocess
from datetime import datetime, timedelta

import pytest

from scripts.quickstart_service import QuickStartService

from .conftest import wait_for

pytestmark = [pytest.mark.sqlite_service, pytest.mark.timeout(420)]

INTERVAL = 3  # seconds between the interval job's slots


@pytest.fixture
def service(tmp_path):
    running = QuickStartService(tmp_path, int(os.environ.get("TEST_PORT_BASE", "16000")) + 480,
                                JOBS_CALLABLE_MODULES="jobs.builtin,tests.jobfuncs")
    try:
        running.start()
        yield running
    except BaseException:
        print(running.log())
        raise
    finally:
        running.stop()


def wait_for_run(service, run_id, statuses=("succeeded", "failed", "timed_out", "lost", "cancelled", "skipped"),
                 timeout=90):
    return wait_for(lambda: (run := service.api("GET", f"runs/{run_id}/", 200))["status"] in statuses and run,
                    timeout=timeout, interval=0.5, message=f"run {run_id} to end")


def job(service, name, target, schedule=None, **fields):
    return service.api("POST", "jobs/", 201, json={"name": name, "kind": "callable", "target": target,
                                                     "schedule": schedule or {"type": "manual"}, **fields})


def runs_of(service, job_id, **filters):
    return service.api("GET", "runs/", 200, params={"job": job_id, "ordering": "scheduled_for", **filters})["results"]


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def next_minute(moment):
    return (moment + timedelta(minutes=1)).replace(second=0, microsecond=0)


def test_the_quick_starts_service_on_sqlite_runs_every_kind_of_work(service, tmp_path):
    assert service.api("GET", "jobs/", 200)["results"] == []
    before = datetime.now().astimezone()
    cron = job(service, "every-minute", "builtin.echo", {"type": "cron", "cron": "* * * * *"}, args=["cron"])
    after = datetime.now().astimezone()
    interval = job(service, "every-3s", "builtin.echo", {"type": "interval", "every_seconds": INTERVAL},
                   args=["interval"])
    flaky = job(service, "flaky", "test.flaky", kwargs={"fail_times": 1}, max_retries=2, retry_backoff_seconds=1,
                retry_jitter=False)
    slow = job(service, "slow", "builtin.sleep", kwargs={"seconds": 120}, timeout_seconds=2, max_retries=0)
    now = job(service, "now", "builtin.echo", args=["by hand"], kwargs={"who": "admin"})
    for name in ("extract", "load"):
        job(service, name, "builtin.echo", args=[name])
    workflow = service.api("POST", "workflows/", 201, json={
        "name": "etl", "nodes": ["extract", "load"], "edges": [{"from": "extract", "to": "load"}]})

    # Run now, a retry, a timeout and the workflow, side by side with the schedules.
    by_hand = service.api("POST", f"jobs/{now['id']}/run/", 202)
    retried = service.api("POST", f"jobs/{flaky['id']}/run/", 202)
    timed_out = service.api("POST", f"jobs/{slow['id']}/run/", 202)
    flow = service.api("POST", f"workflows/{workflow['id']}/run/", 202)

    done = wait_for_run(service, by_hand["id"])
    assert (done["status"], done["trigger"], done["result"]) == (
        "succeeded", "manual", {"args": ["by hand"], "kwargs": {"who": "admin"}})

    done = wait_for_run(service, retried["id"])
    assert (done["status"], done["attempt"], done["result"]) == ("succeeded", 2, {"succeeded_on": 2})
    assert [(a["number"], a["outcome"]) for a in sorted(done["attempts"], key=lambda a: a["number"])] == [
        (1, "failed"), (2, "succeeded")]
    assert "failing attempt 1 on purpose" in done["attempts"][0]["error"] + done["attempts"][1]["error"]

    done = wait_for_run(service, timed_out["id"])
    assert done["status"] == "timed_out" and done["attempt"] == 1
    assert done["duration_seconds"] < 60  # ended by its 2-second timeout, long before its 120 s of sleep

    flow = wait_for(lambda: (got := service.api("GET", f"workflow-runs/{flow['id']}/", 200))["status"] != "running"
                    and got, timeout=90, interval=0.5, message="the workflow run to end")
    assert flow["status"] == "succeeded"
    assert [(s["job_name"], s["status"]) for s in flow["steps"]] == [("extract", "succeeded"), ("load", "succeeded")]

    # The interval job: three runs in a row, a slot every INTERVAL seconds.
    first = wait_for(lambda: (got := runs_of(service, interval["id"]))[2:] and got[:3], timeout=60, interval=0.5,
                     message="three runs of the interval job")
    scheduled = [wait_for_run(service, run["id"]) for run in first]
    assert [(run["status"], run["trigger"], run["result"]) for run in scheduled] == [
        ("succeeded", "schedule", {"args": ["interval"], "kwargs": {}})] * 3
    slots = [at(run["scheduled_for"]) for run in scheduled]
    assert [b - a for a, b in zip(slots, slots[1:], strict=False)] == [timedelta(seconds=INTERVAL)] * 2

    # The cron job: its first slot is the first whole minute after it was made.
    cron_runs = wait_for(lambda: runs_of(service, cron["id"]), timeout=120, interval=1,
                         message="the cron job's first run")
    first_slot = at(cron_runs[0]["scheduled_for"])
    assert next_minute(before) <= first_slot <= next_minute(after)
    done = wait_for_run(service, cron_runs[0]["id"])
    assert (done["status"], done["trigger"], done["result"]) == ("succeeded", "schedule", {"args": ["cron"], "kwargs": {}})

    # A check-in's ping, as a crontab line sends it: answered once queued, recorded by the leader.
    checkin = service.api("POST", "jobs/", 201, json={"name": "elsewhere", "kind": "checkin", "target": "a crontab",
                                                       "schedule": {"type": "manual"}})
    ping_url = f"{service.url}/ping/{checkin['ping_url'].rsplit('/', 1)[1]}"
    sent = subprocess.run(["curl", "-fsS", "-m", "10", "--retry", "5", "--data-binary", "42 tables", ping_url],
                          capture_output=True, text=True, timeout=60)
    assert (sent.returncode, sent.stdout) == (0, "OK"), sent.stderr
    pinged = wait_for(lambda: runs_of(service, checkin["id"]), timeout=30, interval=0.5,
                      message="the ping's run, recorded by the leader")
    [run] = [service.api("GET", f"runs/{run['id']}/", 200) for run in pinged]
    assert (run["status"], run["trigger"], run["output"]) == ("succeeded", "ping", "42 tables")

    # Nothing failed that should not have: the service's own log has no SQLite lock error.
    assert "database is locked" not in service.log_path.read_text(errors="replace")
