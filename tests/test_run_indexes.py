"""The runs' indexes name no column a claim or a heartbeat changes, so both update a run in place (a
HOT update, no index entry written); and every page and pass that read runs by status still reads
them through an index (``phase``, models.run), never the whole table."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import lifecycle
from jobs.lifecycle import postgres as hotpath
from jobs.metrics import collector
from jobs.models import JobRun, RunStatus, RunTrigger
from jobs.operations import reports
from jobs.scheduling import dispatch, monitor
from tests.api_personas import make_personas
from tests.test_notifications_support import make_job

pytestmark = [pytest.mark.postgres("reads PostgreSQL's plans and its counts of HOT updates"), pytest.mark.django_db]

HISTORY_JOBS = 50
HISTORY_RUNS = 10_000


def updates_of(table):
    """(updates, HOT updates) of ``table`` in this transaction so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s", [table])
        return cursor.fetchone()


def test_a_claim_and_a_heartbeat_write_no_index_and_a_success_no_partial_one():
    job = make_job()
    now = timezone.now()
    run = JobRun.objects.create(job=job, scheduled_for=now, queued_at=now, status=RunStatus.QUEUED)
    runs_before = updates_of("jobs_jobrun")

    assert lifecycle.claim(run.pk, 1, worker="w", pid=1) is not None
    attempts_before = updates_of("jobs_jobattempt")
    assert lifecycle.heartbeat(run.pk, 1, output="so far", output_bytes=6) is True
    runs_claimed_and_beat, attempts_beat = updates_of("jobs_jobrun"), updates_of("jobs_jobattempt")
    assert lifecycle.record_success(run.pk, 1) is True
    runs_succeeded = updates_of("jobs_jobrun")

    def change(after, before):
        return after[0] - before[0], after[1] - before[1]

    assert change(runs_claimed_and_beat, runs_before) == (2, 2)  # both HOT
    assert change(attempts_beat, attempts_before) == (1, 1)  # the attempt's heartbeat: HOT
    assert change(runs_succeeded, runs_claimed_and_beat) == (1, 0)  # it leaves run_active_idx
    assert JobRun.objects.filter(pk=run.pk, phase__isnull=True, status=RunStatus.SUCCEEDED).exists()


@pytest.fixture
def history():
    """People, 50 jobs with 10,000 runs over a day (a few failed, lost, skipped), a few runs in each
    unfinished status, and the statistics taken: the planner picks as it would at scale."""
    people = make_personas()
    jobs = [people.job] + [make_job(name=f"job-{i}") for i in range(HISTORY_JOBS - 1)]
    now = timezone.now()
    ended = {0: RunStatus.FAILED, 1: RunStatus.LOST, 2: RunStatus.SKIPPED}
    JobRun.objects.bulk_create([
        JobRun(job=jobs[i % HISTORY_JOBS], status=ended.get(i % 97, RunStatus.SUCCEEDED),
               scheduled_for=now - timedelta(seconds=4 * i), created_at=now - timedelta(seconds=4 * i),
               started_at=now - timedelta(seconds=4 * i), finished_at=now - timedelta(seconds=4 * i - 1))
        for i in range(1, HISTORY_RUNS)], batch_size=5000)
    unfinished = [(RunStatus.QUEUED, None), (RunStatus.RUNNING, None), (RunStatus.PENDING, now + timedelta(hours=1)),
                  (RunStatus.RETRYING, now + timedelta(minutes=1))]
    JobRun.objects.bulk_create([
        JobRun(job=jobs[i], status=status, scheduled_for=now + timedelta(seconds=10 * k + i + 1), created_at=now,
               queued_at=now, started_at=now if status == RunStatus.RUNNING else None, heartbeat_at=now,
               next_attempt_at=at, trigger=RunTrigger.SCHEDULE)
        for k, (status, at) in enumerate(unfinished) for i in range(5)])
    with connection.cursor() as cursor:
        # Not the attempts (the history has none): statistics outlive the test's rollback, and an empty
        # table's would have later tests' plans read attempts in full (tests/test_worker_path.py).
        cursor.execute("ANALYZE jobs_jobrun")
    return people


def runs_read_in_full(action, *args):
    """What ``action(*args)`` returns, and the statements it runs that read jobs_jobrun with a Seq
    Scan, as EXPLAIN plans them."""
    with CaptureQueriesContext(connection) as queries:
        result = action(*args)
    full = []
    for query in queries.captured_queries:
        sql = query["sql"]
        if "jobs_jobrun" not in sql or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0][0]["Plan"]
            transaction.set_rollback(True)
        if any(node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "jobs_jobrun"
               for node in plan_nodes(plan)):
            full.append(sql)
    return result, full


def plan_nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def test_the_passes_and_pages_read_runs_by_status_through_an_index(history):
    # (One test: the history takes most of its time.)
    now = timezone.now()
    passes = {
        "monitor: lost": lambda: monitor.mark_lost(now),
        "monitor: overdue": lambda: monitor.mark_overdue(now),
        "monitor: never started": lambda: monitor.fail_never_started(now),
        "monitor: unclaimed": lambda: monitor.republish_unclaimed(now - timedelta(hours=1)),
        "dispatch: active runs": lambda: dispatch.active_runs_by_job([history.job.pk]),
        "dispatch: crowded slots": lambda: dispatch.crowded_slots(now, now + timedelta(hours=2)),
        "retries due": lambda: lifecycle.queue_due_retries(now),
        "release: by the ORM": lambda: lifecycle.release_pending(now),
        "release: held": lambda: lifecycle.release_held(now),
        "metrics": lambda: collector.runs_by_status(connection.cursor()),
        "report": lambda: reports.job_report(history.job, 30, now),
    }
    for name, action in passes.items():
        assert runs_read_in_full(action)[1] == [], name

    release = release_reads(now)
    assert ("Index Scan", "run_active_idx") in release and ("Seq Scan", None) not in release, release

    job = history.job.pk
    for who in (history.staff, history.owner):
        client = Client()
        client.force_login(who)
        for url in ["/", "/runs/?status=failed", "/runs/?status=running", "/runs/?status=queued",
                    f"/runs/?status=lost&job={job}", f"/jobs/{job}/?status=failed", f"/jobs/{job}/",
                    "/api/runs/?status=failed", f"/api/runs/?status=skipped&job={job}"]:
            response, full = runs_read_in_full(client.get, url)
            assert full == [] and response.status_code == 200, (who, url)


def release_reads(now):
    """How the release statement (lifecycle.postgres, not the ORM's) reads the runs: {(node, index)}."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + hotpath.RELEASE_SQL,
                       {"pending": RunStatus.PENDING, "queued": RunStatus.QUEUED, "now": now, "batch": 100})
        plan = cursor.fetchone()[0][0]["Plan"]
        transaction.set_rollback(True)
    return {(node["Node Type"].replace("Bitmap Index Scan", "Index Scan"), node.get("Index Name"))
            for node in plan_nodes(plan)
            if node.get("Relation Name") == "jobs_jobrun" and node["Node Type"] not in ("ModifyTable", "Bitmap Heap Scan")
            or node.get("Index Name") == "run_active_idx"}
