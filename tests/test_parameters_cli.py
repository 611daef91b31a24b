"""jobsctl and parameters against a live service (a real gunicorn web process, jobsctl installed
and run as a subprocess; a real worker where the run must finish): ``run --param``, ``backfill
--param``, ``runs --param``, and a bad value refused with one line and nothing queued."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from jobs.access import tokens
from jobs.models import JobRun, RunStatus

from .test_cli import HOURLY, lines, make_job

pytestmark = pytest.mark.timeout(300)

DECLARED = [{"name": "day", "type": "date", "required": True},
            {"name": "customer", "type": "integer", "default": 1}]


@pytest.fixture
def people(transactional_db):
    users = [User.objects.create_user(name) for name in ("owner", "outsider")]
    return {user.username: tokens.create(user)[1] for user in users}


def test_run_with_params_queues_a_run_with_the_values_and_waits_for_it(jobsctl, people, processes):
    make_job("report", target="builtin.echo", parameters=DECLARED)
    processes.worker(concurrency=1)

    done = jobsctl("run", "report", "--param", "day=2026-11-01", "--param", "customer=42", "--wait", "--timeout", "60",
                   token=people["owner"])

    assert done.returncode == 0, done.stderr
    run = JobRun.objects.get()
    assert run.status == RunStatus.SUCCEEDED and run.params == {"day": "2026-11-01", "customer": 42}
    assert "params: day=2026-11-01, customer=42" in done.stdout


def test_run_refuses_a_bad_value_with_one_line_and_queues_nothing(jobsctl, people):
    make_job("report", target="builtin.echo", parameters=DECLARED)
    cases = [
        (["--param", "day=tomorrow"], 6, "params.day: day must be a date, YYYY-MM-DD"),
        (["--param", "customer=2"], 6, "params.day: day is required"),
        (["--param", "day=2026-11-01", "--param", "color=red"], 6, "params.color: Unknown parameter 'color'"),
        (["--param", "day"], 2, "--param 'day': give NAME=VALUE"),
        (["--param", "day=2026-11-01", "--param", "day=2026-11-02"], 2, "--param day is given twice"),
    ]
    for args, code, words in cases:
        refused = jobsctl("run", "report", *args, token=people["owner"])
        assert refused.returncode == code, (args, refused.stderr)
        assert words in refused.stderr and len(lines(refused.stderr)) == 1, refused.stderr
    hidden = jobsctl("run", "report", "--param", "day=2026-11-01", token=people["outsider"])
    assert hidden.returncode == 3
    assert not JobRun.objects.exists()


def test_backfill_gives_each_run_the_values_and_runs_lists_them_by_value(jobsctl, people):
    make_job("hourly", HOURLY, parameters=[{"name": "customer", "type": "integer", "default": 1}])
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    start, end = first.isoformat(), (first + timedelta(hours=1, minutes=30)).isoformat()

    done = jobsctl("backfill", "hourly", "--start", start, "--end", end, "--param", "customer=42", token=people["owner"])
    assert done.returncode == 0, done.stderr
    assert [run.params for run in JobRun.objects.order_by("scheduled_for")] == [{"customer": 42}] * 2
    jobsctl("backfill", "hourly", "--start", (first - timedelta(hours=1)).isoformat(), "--end", start,
            token=people["owner"])
    assert JobRun.objects.filter(params={"customer": 1}).count() == 1

    listed = json.loads(jobsctl("runs", "hourly", "--param", "customer=42", "--json", token=people["owner"]).stdout)
    assert sorted(run["id"] for run in listed) == sorted(JobRun.objects.filter(params={"customer": 42})
                                                         .values_list("pk", flat=True))
    table = jobsctl("runs", "hourly", "--param", "customer=1", token=people["owner"])
    assert lines(table.stdout)[0].split()[-1] == "PARAMS" and "customer=1" in lines(table.stdout)[1]
    unnamed = jobsctl("runs", "--param", "customer=1", token=people["owner"])
    assert unnamed.returncode == 2 and "name the JOB" in unnamed.stderr
