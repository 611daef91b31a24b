"""The two implementations of the lifecycle's claim, success and release of waiting runs (a
statement on PostgreSQL, the ORM elsewhere) make the same change; and no move leaves the state
machine."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.execution import publishing
from jobs.lifecycle import attempts, moves, postgres, runs
from jobs.models import AttemptOutcome, JobAttempt, JobRun, RunEnd, RunStatus, RunTrigger

from .test_notifications_support import make_job

pytestmark = [pytest.mark.django_db, pytest.mark.postgres("the statements are PostgreSQL's")]

RUN_STATE = ("status", "attempt", "worker", "output", "output_bytes", "result", "error", "reason")
ATTEMPT_STATE = ("number", "outcome", "task_id", "worker", "pid", "error", "traceback")


def twin_runs(job, **fields):
    """Two queued runs alike but for their slot."""
    now = timezone.now()
    base = {"status": RunStatus.QUEUED, "queued_at": now, "trigger": RunTrigger.SCHEDULE, **fields}
    return [JobRun.objects.create(job=job, scheduled_for=fields.get("scheduled_for", now) + timedelta(seconds=i),
                                  **{k: v for k, v in base.items() if k != "scheduled_for"}) for i in range(2)]


def state(run_id):
    run = JobRun.objects.get(pk=run_id)
    attempt = JobAttempt.objects.filter(run_id=run_id).first()
    shown = {name: getattr(run, name) for name in RUN_STATE}
    shown["started"] = run.started_at is not None
    shown["finished"] = run.finished_at is not None
    shown["beat_at_start"] = run.heartbeat_at == run.started_at
    if attempt is not None:
        shown.update({f"attempt_{name}": getattr(attempt, name) for name in ATTEMPT_STATE})
        shown["attempt_task_id"] = shown["attempt_task_id"] == f"run-{run_id}-{attempt.number}"
        shown["attempt_beat_at_start"] = attempt.heartbeat_at == attempt.started_at
        shown["attempt_finished_with_run"] = attempt.finished_at == run.finished_at
    # The end each records for the pages' figures (jobs.lifecycle.rollup): none until the run ends.
    end = RunEnd.objects.filter(run_id=run_id).first()
    shown["end"] = end and (end.job_id == run.job_id, end.status, end.ended_at == run.finished_at,
                            end.seconds == pytest.approx((run.finished_at - run.started_at).total_seconds()))
    return shown


def test_the_claim_statement_makes_the_orm_claims_change():
    sql_run, orm_run = twin_runs(make_job())

    by_sql = postgres.claim(sql_run.pk, 1, "w1@host", 42)
    by_orm = attempts.claim_by_orm(orm_run.pk, 1, "w1@host", 42)

    assert by_sql is not None and by_orm is not None
    assert state(sql_run.pk) == state(orm_run.pk)
    assert state(sql_run.pk)["status"] == RunStatus.RUNNING
    assert (by_sql.job.pk, by_sql.attempt, by_sql.status) == (by_orm.job.pk, by_orm.attempt, by_orm.status)


@pytest.mark.parametrize("case", ["claimed already", "another attempt", "past its start deadline"])
def test_the_claim_statement_refuses_what_the_orm_claim_refuses(case):
    job = make_job(start_deadline_seconds=60)
    fields = {"scheduled_for": timezone.now() - timedelta(seconds=600)} if case == "past its start deadline" else {}
    sql_run, orm_run = twin_runs(job, **fields)
    attempt = 2 if case == "another attempt" else 1
    if case == "claimed already":
        postgres.claim(sql_run.pk, 1, "w0@host", 1)
        attempts.claim_by_orm(orm_run.pk, 1, "w0@host", 1)

    assert postgres.claim(sql_run.pk, attempt, "w1@host", 42) is None
    assert attempts.claim_by_orm(orm_run.pk, attempt, "w1@host", 42) is None
    assert state(sql_run.pk) == state(orm_run.pk)


@pytest.mark.parametrize("result", [None, {"rows": 7}, [1, "two"]])
def test_the_success_statement_makes_the_orm_successs_change(result):
    sql_run, orm_run = twin_runs(make_job())
    for run in (sql_run, orm_run):
        attempts.claim_by_orm(run.pk, 1, "w1@host", 42)

    moved, wanted = postgres.succeed(sql_run.pk, 1, "the output", 10, result, "FALSE")
    assert (moved, wanted) == (True, False)
    assert attempts.succeed_by_orm(orm_run.pk, 1, "the output", 10, result) is True

    assert state(sql_run.pk) == state(orm_run.pk)
    assert state(sql_run.pk)["status"] == RunStatus.SUCCEEDED
    assert state(sql_run.pk)["attempt_outcome"] == AttemptOutcome.SUCCEEDED
    assert state(sql_run.pk)["end"] == (True, RunStatus.SUCCEEDED, True, True)
    assert JobRun.objects.get(pk=sql_run.pk).finished_at is not None


@pytest.mark.parametrize("case", ["not running", "another attempt"])
def test_the_success_statement_refuses_what_the_orm_success_refuses(case):
    sql_run, orm_run = twin_runs(make_job())
    if case == "another attempt":
        for run in (sql_run, orm_run):
            attempts.claim_by_orm(run.pk, 1, "w1@host", 42)
    attempt = 2 if case == "another attempt" else 1

    assert postgres.succeed(sql_run.pk, attempt, "x", 1, None, "FALSE") == (False, False)
    assert attempts.succeed_by_orm(orm_run.pk, attempt, "x", 1, None) is False
    assert state(sql_run.pk) == state(orm_run.pk)


def test_a_success_someone_wants_is_left_to_the_orm_and_changes_nothing():
    run, _ = twin_runs(make_job())
    attempts.claim_by_orm(run.pk, 1, "w1@host", 42)
    before = state(run.pk)

    assert postgres.succeed(run.pk, 1, "x", 1, None, "TRUE") == (False, True)
    assert state(run.pk) == before


def waiting_runs(now, way):
    """A waiting run whose start has come, one still waiting, and one of a paused job, each of its own job."""
    waiting = {"status": RunStatus.PENDING, "trigger": RunTrigger.SCHEDULE, "reason": "dispatched ahead"}
    due = JobRun.objects.create(job=make_job(f"{way}-due", priority=7, queue="q7"), scheduled_for=now,
                                next_attempt_at=now, **waiting)
    later = JobRun.objects.create(job=make_job(f"{way}-later"), scheduled_for=now + timedelta(seconds=30),
                                  next_attempt_at=now + timedelta(seconds=30), **waiting)
    paused = JobRun.objects.create(job=make_job(f"{way}-paused", enabled=False), scheduled_for=now,
                                   next_attempt_at=now, **waiting)
    return due, later, paused


def released_state(run_id):
    run = JobRun.objects.get(pk=run_id)
    return (run.status, run.attempt, run.reason, run.next_attempt_at is None, run.queued_at is not None,
            run.finished_at is not None)


def test_the_release_statement_makes_the_orm_releases_change(monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(publishing, "publish", lambda messages, batch=1000: sent.extend(messages))
    now = timezone.now()
    by_sql = waiting_runs(now, "sql")
    with django_capture_on_commit_callbacks(execute=True):
        assert runs.release_timed(now) == 1
    by_sql_messages, sent[:] = list(sent), []
    by_orm = waiting_runs(now, "orm")
    with django_capture_on_commit_callbacks(execute=True):
        assert runs._release_timed(now, 2000, 100, runs._release_by_orm) == 1

    assert [released_state(run.pk) for run in by_sql] == [released_state(run.pk) for run in by_orm]
    assert released_state(by_sql[0].pk)[0] == RunStatus.QUEUED
    assert released_state(by_sql[1].pk)[0] == RunStatus.PENDING
    assert released_state(by_sql[2].pk)[0] == RunStatus.SKIPPED
    assert [m._replace(run_id=0, job_id=0) for m in by_sql_messages] == [m._replace(run_id=0, job_id=0) for m in sent]
    assert [(m.run_id, m.queue, m.priority) for m in by_sql_messages] == [(by_sql[0].pk, "q7", 7)]


@pytest.mark.parametrize("to, frm", [(RunStatus.SUCCEEDED, RunStatus.QUEUED), (RunStatus.RUNNING, RunStatus.SUCCEEDED),
                                     (RunStatus.LOST, RunStatus.QUEUED), (RunStatus.SKIPPED, RunStatus.RUNNING)])
def test_no_move_leaves_the_state_machine(to, frm):
    run, _ = twin_runs(make_job(), status=frm)
    with pytest.raises(ValueError, match="cannot go from"):
        moves.transition(run, to, frm=[frm])
    assert JobRun.objects.get(pk=run.pk).status == frm
