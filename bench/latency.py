"""Start latency: run-now through the API to ``started``, and a scheduled slot to ``started``.

A real web server (gunicorn, the Procfile's settings), one worker (``-c 2``, prefork) and one beat
(the scheduler leader) against an otherwise idle database. Run now: POST /api/jobs/<id>/run/ with
a token, one request at a time, the next once the run has finished; latency = the run's
``started_at`` - the moment before the request was sent. Scheduled: one-time jobs whose slots
fall every --gap seconds; latency = ``started_at`` - ``scheduled_for``. Baseline, in the same
invocation: a raw Celery task (``bench/rawcelery.py``, same delivery settings) published with
``apply_async`` and stamping when a pool process starts it.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler_bench9 REDIS_URL=redis://127.0.0.1:6379/12 \\
        .venv/bin/python bench/latency.py --samples 200

``--kind command``: the jobs are the command ``true`` instead of the function ``builtin.noop`` (how
the worker starts it follows JOBS_COMMAND_ISOLATION in the environment).
"""

import os
import sys
import time
from datetime import timedelta

import benchenv
from harness import database
from harness.processes import Processes, beat, free_port, gunicorn, wait_until, worker
from harness.readings import pct
from harness.table import say

REPO = benchenv.setup(JOBS_DEFAULT_QUEUE="bench", JOBS_RETENTION_INTERVAL_SECONDS="0")

import redis  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.access import tokens  # noqa: E402
from jobs.actions.permissions import COMMAND_RUNNERS_GROUP  # noqa: E402
from jobs.definitions.jobs import save_job  # noqa: E402
from jobs.models import Job, JobRun, RunStatus  # noqa: E402


def reset():
    database.empty()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def warm_worker(job):
    """One run through the worker first: imports, connections."""
    from jobs import lifecycle

    run = lifecycle.create_run(job)
    wait_until(lambda: JobRun.objects.filter(pk=run.pk, status=RunStatus.SUCCEEDED).exists(), 60, "the worker")


def run_now_latencies(base_url, token, job, samples):
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    latencies = []
    for i in range(samples):
        sent = timezone.now()
        answer = session.post(f"{base_url}/api/jobs/{job.pk}/run/")
        if answer.status_code != 202:
            raise SystemExit(f"run now answered {answer.status_code}: {answer.text[:300]}")
        run_id = answer.json()["id"]
        wait_until(lambda pk=run_id: JobRun.objects.filter(pk=pk, status=RunStatus.SUCCEEDED).exists(), 30, "the run")
        started = JobRun.objects.get(pk=run_id).started_at
        latencies.append((started - sent).total_seconds())
        if (i + 1) % 50 == 0:
            say(f"  run now: {i + 1}/{samples}, p50 so far {pct(sorted(latencies), 50) * 1000:.1f} ms")
        time.sleep(0.05)
    return latencies


def noop(kind):
    return {"kind": kind, "target": "builtin.noop" if kind == "callable" else "true"}


def scheduled_latencies(samples, gap, kind):
    start = timezone.now() + timedelta(seconds=5)
    for i in range(samples):
        save_job(Job(name=f"slot-{i}", **noop(kind)),
                 {"type": "once", "run_at": (start + timedelta(seconds=i * gap)).isoformat()})
    end = start + timedelta(seconds=samples * gap + 10)
    done = 0
    while timezone.now() < end and done < samples:
        time.sleep(5)
        done = JobRun.objects.filter(job__name__startswith="slot-", status=RunStatus.SUCCEEDED).count()
        say(f"  scheduled: {done}/{samples} slots run")
    rows = JobRun.objects.filter(job__name__startswith="slot-", started_at__isnull=False)
    return [(r.started_at - r.scheduled_for).total_seconds() for r in rows.only("started_at", "scheduled_for")]


def raw_latencies(samples):
    sys.path.insert(0, str(REPO / "bench"))
    from rawcelery import stamp

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("bench:stamps")
    for i in range(samples + 5):
        stamp.apply_async(args=[time.time()])
        wait_until(lambda n=i: client.llen("bench:stamps") > n, 30, "the raw task")
        time.sleep(0.05)
    return [float(x) for x in client.lrange("bench:stamps", 5, -1)]


def main():
    parser = benchenv.parser(__doc__, samples=200, gap=(0.25, "seconds between scheduled slots"))
    parser.add_argument("--kind", choices=["callable", "command"], default="callable")
    parser.add_argument("--staff", action="store_true",
                        help="run now as staff (no quotas); by default as the job's owner, who is not staff, so "
                             "each run now pays its quota checks")
    args = parser.parse_args()
    database.migrate()
    reset()
    user, _ = User.objects.update_or_create(username="bench", defaults={"is_staff": args.staff})
    if args.kind == "command":
        user.groups.add(Group.objects.get(name=COMMAND_RUNNERS_GROUP))
    key = tokens.create(user)[1]  # (the token, its key)
    job = save_job(Job(name="run-now", owner=user, **noop(args.kind)), {"type": "manual"})
    port = free_port()
    results = {}
    with Processes() as procs:
        service = {"DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1,localhost"}
        procs.start("web", gunicorn(port), **service)
        procs.start("worker", worker("scheduler_site", "bench"), **service)
        procs.start("raw", worker("bench.rawcelery", "rawbench"), **service)
        wait_until(lambda: _answers(port), 60, "gunicorn", procs)
        warm_worker(job)
        say(f"raw Celery: {args.samples} tasks, publish to start")
        results["raw Celery: apply_async → task starts"] = raw_latencies(args.samples)
        say(f"ours: {args.samples} run-now requests")
        results["ours: POST run now → started_at"] = run_now_latencies(f"http://127.0.0.1:{port}", key, job,
                                                                       args.samples)
        procs.start("beat", beat(f"/tmp/bench-latency-beat-{os.getpid()}"), **service)
        say(f"ours: {args.samples} scheduled slots, one every {args.gap} s")
        results["ours: slot → started_at"] = scheduled_latencies(args.samples, args.gap, args.kind)
    say("")
    say(f"{'measure':<40} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, values in results.items():
        values = sorted(values)
        say(f"{name:<40} {len(values):>5} {pct(values, 50) * 1000:>8.1f} {pct(values, 95) * 1000:>8.1f} "
            f"{pct(values, 99) * 1000:>8.1f} {(values or [float('nan')])[-1] * 1000:>8.1f}")
    reset()


def _answers(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/api/", timeout=1).status_code < 500
    except requests.RequestException:
        return False


if __name__ == "__main__":
    main()
