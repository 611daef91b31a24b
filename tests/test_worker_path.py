"""The worker's bookkeeping in single statements (jobs.lifecycle.postgres) means what the ORM path means: one
claimant, an attempt row, the job loaded, deadlines, duplicates counted, the success recorded with
its event when a rule wants one, a dropped connection replaced; and the per-process heartbeat."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import lifecycle
from jobs.lifecycle import events as run_events
from jobs.lifecycle import postgres as hotpath
from jobs.models import AttemptOutcome, DeliveryCounter, JobAttempt, JobRun, RunStatus, RunTrigger
from jobs.worker import heartbeats
from notifications.models import Delivery

from .conftest import wait_for
from .test_notifications_support import channel_with_rule, make_job


def queued_run(job, **fields):
    now = timezone.now()
    fields = {"scheduled_for": now, "queued_at": now, "status": RunStatus.QUEUED, **fields}
    return JobRun.objects.create(job=job, **fields)


@pytest.mark.django_db
def test_one_claim_wins_and_brings_the_run_its_attempt_and_its_job():
    job = make_job(tags=["reports"], kwargs={"to": "ops"}, timeout_seconds=42)
    run = queued_run(job)

    claimed = lifecycle.claim(run.pk, 1, worker="w1@host", pid=123)
    again = lifecycle.claim(run.pk, 1, worker="w2@host", pid=456)

    assert again is None
    assert DeliveryCounter.get(lifecycle.DUPLICATES_DROPPED) == 1
    assert (claimed.pk, claimed.status, claimed.worker) == (run.pk, RunStatus.RUNNING, "w1@host")
    assert (claimed.job.pk, claimed.job.tags, claimed.job.kwargs, claimed.job.timeout_seconds) == (
        job.pk, ["reports"], {"to": "ops"}, 42)
    assert claimed.scheduled_for == run.scheduled_for and claimed.started_at is not None
    # What running does not need is deferred, and still there for job code that asks for it.
    assert {"output", "result", "error"} <= claimed.get_deferred_fields()
    assert "description" in claimed.job.get_deferred_fields()
    assert (claimed.job.description, claimed.output) == (job.description, "")
    attempt = JobAttempt.objects.get(run=run)
    assert (attempt.number, attempt.worker, attempt.pid, attempt.task_id, attempt.outcome) == (
        1, "w1@host", 123, f"run-{run.pk}-1", AttemptOutcome.RUNNING)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.heartbeat_at == run.started_at


def test_of_claimants_racing_on_their_own_connections_exactly_one_wins(transactional_db):
    # The conditional UPDATE is the fence: four deliveries of one run, released together.
    run = queued_run(make_job())
    start = threading.Barrier(4)
    won = []

    def deliver(worker):
        try:
            start.wait(timeout=10)
            won.append(lifecycle.claim(run.pk, 1, worker=worker, pid=1))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver, args=(f"w{i}@host",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    winners = [claimed for claimed in won if claimed is not None]
    assert len(won) == 4 and len(winners) == 1
    assert list(JobAttempt.objects.filter(run=run).values_list("worker", flat=True)) == [winners[0].worker]
    assert DeliveryCounter.get(lifecycle.DUPLICATES_DROPPED) == 3
    run.refresh_from_db()
    assert (run.status, run.worker) == (RunStatus.RUNNING, winners[0].worker)


@pytest.mark.django_db
def test_a_scheduled_run_past_its_start_deadline_is_skipped_not_claimed():
    job = make_job(start_deadline_seconds=60)
    late = queued_run(job, trigger=RunTrigger.SCHEDULE, scheduled_for=timezone.now() - timedelta(seconds=90))
    on_time = queued_run(job, trigger=RunTrigger.SCHEDULE, scheduled_for=timezone.now() - timedelta(seconds=30))
    manual = queued_run(job, trigger=RunTrigger.MANUAL, scheduled_for=timezone.now() - timedelta(seconds=900))

    assert lifecycle.claim(late.pk, 1, worker="w", pid=1) is None
    assert lifecycle.claim(on_time.pk, 1, worker="w", pid=1) is not None
    assert lifecycle.claim(manual.pk, 1, worker="w", pid=1) is not None
    late.refresh_from_db()
    assert late.status == RunStatus.SKIPPED and late.reason.startswith("missed")
    assert DeliveryCounter.get(lifecycle.DUPLICATES_DROPPED) == 0


@pytest.mark.django_db
def test_a_success_is_recorded_once_with_its_result_and_attempt():
    job = make_job()
    run = queued_run(job)
    lifecycle.claim(run.pk, 1, worker="w", pid=1)

    assert lifecycle.record_success(run.pk, 1, "out", 3, {"rows": 7}) is True
    assert lifecycle.record_success(run.pk, 1, "again", 5, None) is False

    run.refresh_from_db()
    assert (run.status, run.output, run.output_bytes, run.result, run.error) == (
        RunStatus.SUCCEEDED, "out", 3, {"rows": 7}, "")
    assert JobAttempt.objects.get(run=run).outcome == AttemptOutcome.SUCCEEDED
    other = queued_run(job, scheduled_for=timezone.now() + timedelta(seconds=1))
    lifecycle.claim(other.pk, 1, worker="w", pid=1)
    lifecycle.record_success(other.pk, 1)
    assert JobRun.objects.filter(pk=other.pk, result__isnull=True).exists()  # SQL NULL, as the ORM stores None


@pytest.mark.django_db
@pytest.mark.parametrize("scope", ["all", "tag", "job"])
def test_a_success_a_rule_wants_is_recorded_with_its_delivery(scope):
    job = make_job(tags=["reports"])
    rule = {"tag": {"scope": "tag", "tag": "reports"}, "job": {"scope": "job", "job": job}}.get(scope, {})
    channel = channel_with_rule("slack", {"url": "http://127.0.0.1:9/a"}, ["succeeded"], **rule)
    unwatched = make_job("unwatched")
    for watched in (job, unwatched):
        run = queued_run(watched)
        lifecycle.claim(run.pk, 1, worker="w", pid=1)
        assert lifecycle.record_success(run.pk, 1) is True

    heard = {"nightly-report"} if scope != "all" else {"nightly-report", "unwatched"}
    assert set(Delivery.objects.values_list("job__name", "event", "channel")) == {
        (name, "succeeded", channel.pk) for name in heard}
    assert set(JobRun.objects.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}


@pytest.mark.django_db
def test_a_disabled_rule_or_channel_wants_nothing():
    job = make_job()
    channel = channel_with_rule("slack", {"url": "http://127.0.0.1:9/a"}, ["succeeded"])
    channel.rules.update(enabled=False)
    run = queued_run(job)
    lifecycle.claim(run.pk, 1, worker="w", pid=1)
    lifecycle.record_success(run.pk, 1)

    assert not Delivery.objects.exists()


@pytest.mark.postgres("pg_terminate_backend drops the connection")
def test_a_connection_the_database_dropped_is_replaced(transactional_db):
    job = make_job()
    run = queued_run(job)
    connection.ensure_connection()
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]

    killer = threading.Thread(target=_terminate, args=(pid,))
    killer.start()
    killer.join()

    assert lifecycle.claim(run.pk, 1, worker="w", pid=1) is not None
    assert lifecycle.record_success(run.pk, 1) is True


@pytest.mark.postgres("server-side prepared statements")
@pytest.mark.parametrize("prepared", [True, False])
def test_the_claim_and_the_success_are_prepared_on_the_server_unless_turned_off(transactional_db, settings,
                                                                             prepared):
    # Django opens connections with preparation off; prepare=True alone was quietly ignored.
    settings.JOBS_PREPARED_STATEMENTS = prepared
    connection.close()
    job = make_job()
    first, second = queued_run(job), queued_run(job, scheduled_for=timezone.now() + timedelta(seconds=1))
    for run in (first, second):
        lifecycle.claim(run.pk, 1, worker="w", pid=1)
        lifecycle.record_success(run.pk, 1)

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        statements = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT count(*) FROM jobs_jobrun WHERE status = 'succeeded'")
        succeeded = cursor.fetchone()[0]
    assert succeeded == 2
    assert sorted("UPDATE jobs_jobrun AS r" in s or "WITH target AS" in s for s in statements) == (
        [True, True] if prepared else [])
    connection.close()


def _terminate(pid):
    try:
        with connection.cursor() as cursor:  # this thread's own connection
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        connection.close()


@pytest.mark.postgres("counts the thread's connection in pg_stat_activity")
def test_one_heartbeat_thread_beats_for_every_held_attempt_and_stops_a_taken_run(transactional_db, settings):
    settings.JOBS_HEARTBEAT_SECONDS = 0.2
    job = make_job()
    kept, taken = queued_run(job), queued_run(job, scheduled_for=timezone.now() + timedelta(seconds=1))
    for run in (kept, taken):
        lifecycle.claim(run.pk, 1, worker="w", pid=1)
    claimed_at = JobRun.objects.get(pk=kept.pk).heartbeat_at
    kept_stopped = heartbeats.hold(kept.pk, 1)
    taken_stopped = heartbeats.hold(taken.pk, 1)
    try:
        lifecycle.cancel(taken)
        wait_for(taken_stopped.is_set, timeout=10, message="the cancelled run's stop signal")
        wait_for(lambda: JobRun.objects.get(pk=kept.pk).heartbeat_at > claimed_at, timeout=10,
                 message="a heartbeat of the held run")
        assert JobAttempt.objects.get(run=kept).heartbeat_at > claimed_at
        assert not kept_stopped.is_set()
        assert [t.name for t in threading.enumerate()].count("heartbeats") == 1
    finally:
        heartbeats.release(kept.pk, 1)
        heartbeats.release(taken.pk, 1)
    # With nothing to beat for, the thread closes its connection (the test database can go).
    wait_for(lambda: not _heartbeat_connections(), timeout=10, message="the heartbeat connection closed")


def _heartbeat_connections():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND state IS NOT NULL")
        return cursor.fetchone()[0]


@pytest.mark.postgres("the single-statement success exists on PostgreSQL only")
@pytest.mark.django_db
def test_a_run_of_another_trigger_is_recorded_the_ordinary_way():
    # A workflow step's end must be heard in the transition's transaction (the workflows subscriber).
    job = make_job()
    manual, other = queued_run(job), queued_run(job, trigger="workflow", scheduled_for=timezone.now() + timedelta(1))
    for run in (manual, other):
        lifecycle.claim(run.pk, 1, worker="w", pid=1)

    with CaptureQueriesContext(connection) as fast:
        assert lifecycle.record_success(manual.pk, 1) is True
    with CaptureQueriesContext(connection) as ordinary:
        assert lifecycle.record_success(other.pk, 1) is True

    assert not [q for q in fast.captured_queries if q["sql"].startswith("UPDATE")]  # one prepared statement
    assert [q for q in ordinary.captured_queries if q["sql"].startswith('UPDATE "jobs_jobrun"')]
    assert set(JobRun.objects.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}


JOB_TAGS = [[], ["reports"], ["nightly", "reports"], ["Reports"], ["reports-eu"]]
RULES = [  # (scope, tag, whose job, events, rule enabled, channel enabled)
    ("all", "", None, ["succeeded"], True, True),
    ("all", "", None, ["recovered"], True, True),
    ("all", "", None, ["failed", "timed_out"], True, True),
    ("all", "", None, ["succeeded"], False, True),
    ("all", "", None, ["succeeded"], True, False),
    ("tag", "reports", None, ["succeeded"], True, True),
    ("tag", "reports", None, ["failed"], True, True),
    ("job", "", "own", ["succeeded", "failed"], True, True),
    ("job", "", "other", ["succeeded"], True, True),
]


@pytest.mark.postgres("calls the single-statement success directly")
@pytest.mark.django_db
@pytest.mark.parametrize("scope, tag, whose, events, rule_enabled, channel_enabled", RULES)
def test_the_success_statement_asks_the_rules_what_the_ordinary_path_asks(scope, tag, whose, events,
                                                                          rule_enabled, channel_enabled):
    # outbox.rule_wants_sql restates Rule.matches and outbox's rule filter in SQL; were they to
    # part, a success some rule wants would go by the fast path and its notification would be lost.
    from notifications import outbox
    from notifications.models import Channel, Rule

    jobs = [make_job(name=f"job-{i}", tags=tags) for i, tags in enumerate(JOB_TAGS)]
    other = make_job(name="other")
    channel = Channel.objects.create(name="ops", kind="slack", config={"url": "http://127.0.0.1:9/a"},
                                     enabled=channel_enabled)
    for job in jobs:
        Rule.objects.all().delete()
        Rule.objects.create(channel=channel, events=events, scope=scope, tag=tag, enabled=rule_enabled,
                            job={"own": job, "other": other}.get(whose))
        run = queued_run(job)
        lifecycle.claim(run.pk, 1, worker="w", pid=1)
        ordinary = any(outbox._channels_for(run, event) for event in ("succeeded", "recovered"))

        moved, wanted = hotpath.succeed(run.pk, 1, "", 0, None, run_events.wanted_sql("succeeded"))

        assert wanted == ordinary, (job.tags, scope, tag, whose, events)
        assert moved is not wanted


# On PostgreSQL the claim commits without waiting for its flush; a crash of the database just after
# it can lose it while the attempt runs on (tests.jobfuncs.lose_claim leaves what such a crash leaves).

@pytest.mark.django_db
def test_an_outcome_refused_because_the_claim_was_lost_takes_the_claim_back_and_is_recorded(tmp_path):
    from jobs.worker.task import execute_run

    ledger = tmp_path / "ledger"
    job = make_job(target="test.claim_lost", kwargs={"path": str(ledger)})
    run = queued_run(job)

    execute_run.run(run.pk, 1)

    run.refresh_from_db()
    attempts = list(JobAttempt.objects.filter(run=run).values_list("number", "outcome"))
    assert (run.status, run.result, attempts) == (RunStatus.SUCCEEDED, {"attempt": f"{run.pk}:1"},
                                                 [(1, AttemptOutcome.SUCCEEDED)])
    assert len(ledger.read_text().splitlines()) == 1


def test_a_heartbeat_that_finds_the_claim_lost_takes_it_back_and_the_attempt_goes_on(transactional_db, settings):
    from .jobfuncs import lose_claim

    settings.JOBS_HEARTBEAT_SECONDS = 0.2
    run = queued_run(make_job())
    lifecycle.claim(run.pk, 1, worker="w@host", pid=1)
    with heartbeats.held(run.pk, 1, worker="w@host") as entry:
        lose_claim(run.pk, 1)
        wait_for(lambda: JobRun.objects.get(pk=run.pk).status == RunStatus.RUNNING, timeout=10,
                 message="the heartbeat to take the claim back")
        assert not entry.stopped.is_set()
        assert lifecycle.record_success(run.pk, 1) is True
    assert list(JobAttempt.objects.filter(run=run).values_list("number", "worker", "outcome")) == [
        (1, "w@host", AttemptOutcome.SUCCEEDED)]


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["claimed by another delivery", "declared lost and queued again", "cancelled"])
def test_a_claim_is_taken_back_only_when_the_database_lost_it(case):
    from .jobfuncs import lose_claim

    run = queued_run(make_job())
    lifecycle.claim(run.pk, 1, worker="w1@host", pid=1)
    if case == "claimed by another delivery":
        lose_claim(run.pk, 1)
        lifecycle.claim(run.pk, 1, worker="w2@host", pid=2)
    elif case == "declared lost and queued again":
        lifecycle.record_failure(run.pk, 1, "Lost: no heartbeat", lost=True)
    else:
        lifecycle.cancel(JobRun.objects.get(pk=run.pk))
    before = (JobRun.objects.filter(pk=run.pk).values("status", "attempt", "worker").get(),
              list(JobAttempt.objects.filter(run=run).values_list("number", "worker", "outcome")))

    assert lifecycle.restore_claim(run.pk, 1, "w1@host", 1) is False

    assert before == (JobRun.objects.filter(pk=run.pk).values("status", "attempt", "worker").get(),
                      list(JobAttempt.objects.filter(run=run).values_list("number", "worker", "outcome")))


@pytest.mark.postgres("the claim's commit mode is PostgreSQL's")
def test_the_claims_commit_mode_ends_with_it_so_the_outcome_waits_for_the_flush(transactional_db):
    alone, inside = queued_run(make_job()), queued_run(make_job(name="other"))

    assert lifecycle.claim(alone.pk, 1, worker="w", pid=1) is not None  # in autocommit, as the worker does
    assert _synchronous_commit() == "on"
    with transaction.atomic():  # in a caller's transaction: the caller's commit is left as it is
        assert lifecycle.claim(inside.pk, 1, worker="w", pid=1) is not None
        assert _synchronous_commit() == "on"


def _synchronous_commit():
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.postgres("reads PostgreSQL's plan of the success statement")
@pytest.mark.django_db
def test_recording_a_success_reads_its_run_by_id_however_many_runs_are_running():
    # The success had been planned as a scan of every running run (and of the dead index entries
    # runs leave behind) when the statistics said few were running: its cost grew with the load.
    job = make_job()
    run = queued_run(job)
    lifecycle.claim(run.pk, 1, worker="w", pid=1)
    _many_more_after_the_statistics(job, RunStatus.RUNNING)

    reads = _reads(hotpath._succeed_sql(run_events.wanted_sql("succeeded")),
                   {"run_id": run.pk, "attempt": 1, "output": "", "output_bytes": 0, "result": None})

    assert reads == {("jobs_jobrun", "Index Scan", "jobs_jobrun_pkey"),
                     ("jobs_jobattempt", "Index Scan", "attempt_one_per_number")}
    assert lifecycle.record_success(run.pk, 1) is True
    assert JobAttempt.objects.get(run_id=run.pk).outcome == AttemptOutcome.SUCCEEDED


@pytest.mark.postgres("reads PostgreSQL's plan of the claim statement")
@pytest.mark.django_db
def test_a_claim_reads_its_run_by_id_however_many_runs_are_queued():
    job = make_job()
    run = queued_run(job)
    _many_more_after_the_statistics(job, RunStatus.QUEUED)

    reads = _reads(hotpath.CLAIM_SQL, {"run_id": run.pk, "attempt": 1, "worker": "w", "pid": 1, "task_id": "t",
                                       "alone": False})

    assert {(node_type, index) for relation, node_type, index in reads if relation == "jobs_jobrun"} == {
        ("Index Scan", "jobs_jobrun_pkey")}
    assert lifecycle.claim(run.pk, 1, worker="w", pid=1).pk == run.pk


def _many_more_after_the_statistics(job, status):
    """Statistics taken at a quiet moment of a table with some history, then a burst of 3,000 runs
    in ``status``. With one run in it, reading every run through any index looked as cheap as
    reading one by its id, more so over the dead rows the suite's earlier tests leave (in CI the
    claim's plan read run_one_per_slot, then run_recent_idx)."""
    JobRun.objects.bulk_create([JobRun(job=job, scheduled_for=timezone.now() - timedelta(seconds=i + 1),
                                       status=RunStatus.SUCCEEDED) for i in range(2000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_jobrun")
    now = timezone.now()
    JobRun.objects.bulk_create([
        JobRun(job=job, scheduled_for=now + timedelta(seconds=i + 1), queued_at=now, status=status)
        for i in range(3000)])


def _reads(sql, params):
    """How PostgreSQL read the runs and attempts running ``sql`` (rolled back): {(table, node, index)}.
    A bitmap scan through one index counts as an "Index Scan" of it: over many dead rows PostgreSQL
    reads a run by its id that way, as cheaply."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
        transaction.set_rollback(True)
    return {(node["Relation Name"], *_read(node)) for node in _plan_nodes(plan[0]["Plan"])
            if node.get("Relation Name") in ("jobs_jobrun", "jobs_jobattempt") and node["Node Type"] != "ModifyTable"}


def _read(node):
    if node["Node Type"] == "Bitmap Heap Scan":
        indexes = {child.get("Index Name") for child in _plan_nodes(node) if child is not node}
        if len(indexes) == 1 and all(child["Node Type"] == "Bitmap Index Scan"
                                     for child in _plan_nodes(node) if child is not node):
            return "Index Scan", indexes.pop()
    return node["Node Type"], node.get("Index Name")


def _plan_nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


@pytest.mark.postgres("reads PostgreSQL's plans of the heartbeat and of an ordinary outcome")
@pytest.mark.django_db
@pytest.mark.parametrize("step", ["heartbeat", "failure"])
def test_a_heartbeat_and_an_ordinary_outcome_read_their_run_by_id_however_many_runs_are_running(step):
    # Every running attempt beats each JOBS_HEARTBEAT_SECONDS: read through run_active_idx, each beat
    # would read every running run, and the beats of all of them grow with the square of the load.
    job = make_job()
    run = queued_run(job)
    lifecycle.claim(run.pk, 1, worker="w", pid=1)
    _many_more_after_the_statistics(job, RunStatus.RUNNING)

    with CaptureQueriesContext(connection) as queries:
        if step == "heartbeat":
            assert lifecycle.heartbeat(run.pk, 1, output="so far", output_bytes=6) is True
        else:
            lifecycle.record_failure(run.pk, 1, "it broke")
    by_id = f'"jobs_jobrun"."id" = {run.pk} '
    statements = [q["sql"] for q in queries.captured_queries if by_id in q["sql"]]

    assert statements
    for sql in statements:
        assert {(node, index) for relation, node, index in _reads(sql, None) if relation == "jobs_jobrun"} == {
            ("Index Scan", "jobs_jobrun_pkey")}, sql[sql.index(" FROM "):]
    assert JobRun.objects.get(pk=run.pk).status == (RunStatus.RUNNING if step == "heartbeat" else RunStatus.FAILED)
