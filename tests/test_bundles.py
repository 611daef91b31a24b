"""Bundles in the database (no processes; also on SQLite): which runs published together go in one
message, and the bundle's moves (claim, heartbeat, success, hand back) are the single run's."""

import time
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from jobs import lifecycle
from jobs.execution import publishing
from jobs.lifecycle import bundling, runs
from jobs.models import AttemptOutcome, JobAttempt, JobRun, Limit, RecentRuns, RunEnd, RunStatus, RunTrigger
from jobs.worker import bundle as worker_bundle

from .test_notifications_support import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def bundles_of_three(settings):
    settings.JOBS_BUNDLE_MAX_RUNS = 3
    settings.JOBS_BUNDLE_SHORT_SECONDS = 1.0


def queued_runs(job, count, start=None):
    start = start or timezone.now()
    return [JobRun.objects.create(job=job, status=RunStatus.QUEUED, queued_at=start, trigger=RunTrigger.SCHEDULE,
                                  scheduled_for=start + timedelta(seconds=i)) for i in range(count)]


def history(job, seconds):
    RecentRuns.objects.update_or_create(job=job, defaults={"points": [[i, 0.0, s, "succeeded"]
                                                                       for i, s in enumerate(seconds)]})


def test_the_runs_of_short_jobs_published_together_go_in_bundles_by_queue():
    short = make_job("short", bundle="short")
    other_queue = make_job("elsewhere", bundle="short", queue="other")
    long_history = make_job("long")
    history(long_history, [5.0] * 10)
    short_history = make_job("short-history")
    history(short_history, [0.1] * 19 + [3.0])  # the p95 of twenty is the 19th: 0.1 s
    items = [(run.pk, 1, job) for job, count in ((short, 4), (other_queue, 2), (long_history, 2), (short_history, 1))
             for run in queued_runs(job, count)]

    messages = bundling.grouped([runs.message_for(*item) for item in items], [item[2].pk for item in items])

    bundles = [m for m in messages if isinstance(m, publishing.Bundle)]
    alone = [m for m in messages if isinstance(m, publishing.Message)]
    by_job = {item[0]: item[2] for item in items}
    # Five runs of short jobs in the default queue: a bundle of three (JOBS_BUNDLE_MAX_RUNS) and one of two.
    assert sorted(len(b.runs) for b in bundles) == [2, 2, 3]
    for bundle in bundles:
        assert len({by_job[run_id].effective_queue for run_id, _ in bundle.runs}) == 1
        assert bundle.soft_time_limit is None and bundle.time_limit > max(runs.time_limits(short))
    assert sorted(by_job[m.run_id].name for m in alone) == ["long", "long"]


def test_a_job_under_a_limit_a_job_that_says_never_and_a_run_alone_go_alone():
    Limit.objects.create(key="warehouse", max_running=5)
    limited = make_job("limited", bundle="short", limit_key="warehouse")
    never = make_job("never", bundle="never")
    history(never, [0.01] * 10)
    new_never = make_job("new-never", bundle="never")  # no history: never still keeps it alone
    items = [(run.pk, 1, job) for job in (limited, never, new_never) for run in queued_runs(job, 2)]

    messages = bundling.grouped([runs.message_for(*item) for item in items], [item[2].pk for item in items])
    assert all(isinstance(m, publishing.Message) for m in messages) and len(messages) == 6

    one = make_job("one", bundle="short")
    (run,) = queued_runs(one, 1)
    assert bundling.grouped([runs.message_for(run.pk, 1, one)], [one.pk]) == [runs.message_for(run.pk, 1, one)]


def test_a_new_job_is_bundled_until_its_history_says_it_is_long():
    new = make_job("no-history")  # bundle: auto, the default
    items = [(run.pk, 1, new) for run in queued_runs(new, 3)]

    messages = bundling.grouped([runs.message_for(*item) for item in items], [new.pk] * 3)
    assert [type(m) for m in messages] == [publishing.Bundle]
    assert [run_id for run_id, _ in messages[0].runs] == [item[0] for item in items]

    history(new, [5.0] * 5)  # its first five runs were long
    bundling.forget()
    messages = bundling.grouped([runs.message_for(*item) for item in items], [new.pk] * 3)
    assert [type(m) for m in messages] == [publishing.Message] * 3


def test_zero_turns_bundles_off(settings):
    settings.JOBS_BUNDLE_MAX_RUNS = 0
    job = make_job("short", bundle="short")
    items = [(run.pk, 1, job) for run in queued_runs(job, 5)]
    messages = [runs.message_for(*item) for item in items]
    assert bundling.grouped(messages, [job.pk] * 5) == messages


def test_a_bundle_claims_its_queued_runs_in_one_go_with_an_attempt_row_each():
    job = make_job("short", bundle="short")
    made = queued_runs(job, 3)
    other = queued_runs(make_job("other"), 1)[0]
    lifecycle.claim(other.pk, 1, "w0@host", 7)  # claimed already by another delivery

    pairs = [(run.pk, 1) for run in made] + [(other.pk, 1), (made[0].pk, 2)]
    claimed = lifecycle.claim_many(pairs, "w1@host", 42, "bundle-x")

    assert [c.run.pk for c in claimed] == [run.pk for run in made]
    assert all(c.run.job.pk == job.pk and c.claimed_at is not None for c in claimed)
    for run in made:
        run.refresh_from_db()
        assert (run.status, run.worker, run.started_at) == (RunStatus.RUNNING, "w1@host", None)
        attempt = JobAttempt.objects.get(run=run)
        assert (attempt.number, attempt.task_id, attempt.pid, attempt.outcome) == (1, "bundle-x", 42,
                                                                                 AttemptOutcome.RUNNING)
    assert JobAttempt.objects.get(run=other).worker == "w0@host"
    # A second delivery of the bundle claims nothing.
    assert lifecycle.claim_many(pairs, "w2@host", 43, "bundle-x") == []


def test_the_successes_of_a_bundle_are_recorded_together_each_with_its_own_start():
    job = make_job("short", bundle="short")
    job.consecutive_failures = 2
    job.save(update_fields=["consecutive_failures"])
    made = queued_runs(job, 3)
    claimed = lifecycle.claim_many([(run.pk, 1) for run in made], "w1@host", 42, "bundle-x")
    cancelled = made[2]
    lifecycle.cancel(cancelled)

    time.sleep(0.05)
    successes = [lifecycle.Success(c.run.pk, 1, lifecycle.started_at(c, 0.01 * i), f"out {i}", 5, {"i": i})
                 for i, c in enumerate(claimed)]
    recorded = lifecycle.succeed_many(successes)

    assert recorded == {(made[0].pk, 1), (made[1].pk, 1)}  # the cancelled one's success is refused
    for i, run in enumerate(made[:2]):
        run.refresh_from_db()
        attempt = JobAttempt.objects.get(run=run)
        assert (run.status, run.output, run.result, attempt.outcome) == (
            RunStatus.SUCCEEDED, f"out {i}", {"i": i}, AttemptOutcome.SUCCEEDED)
        assert run.started_at == claimed[i].claimed_at + timedelta(seconds=0.01 * i) == attempt.started_at
        assert run.finished_at == attempt.finished_at and run.finished_at >= run.started_at
        assert RunEnd.objects.get(run_id=run.pk).status == RunStatus.SUCCEEDED
    cancelled.refresh_from_db()
    assert cancelled.status == RunStatus.CANCELLED
    job.refresh_from_db()
    assert job.consecutive_failures == 0


def test_runs_handed_back_are_queued_again_at_the_same_attempt_without_an_attempt_row():
    job = make_job("short", bundle="short")
    made = queued_runs(job, 3)
    lifecycle.claim_many([(run.pk, 1) for run in made], "w1@host", 42, "bundle-x")
    lifecycle.cancel(made[2])

    back = lifecycle.hand_back([(run.pk, 1) for run in made[1:]], "bundle-x")

    assert back == [(made[1].pk, 1)]
    made[1].refresh_from_db()
    assert (made[1].status, made[1].attempt, made[1].worker) == (RunStatus.QUEUED, 1, "")
    assert not JobAttempt.objects.filter(run=made[1]).exists()
    assert JobAttempt.objects.get(run=made[2]).outcome == AttemptOutcome.CANCELLED
    # Queued again, it is claimed again like any queued run.
    assert lifecycle.claim(made[1].pk, 1, "w2@host", 9) is not None


def test_a_bundles_heartbeat_keeps_its_claimed_runs_and_tells_which_were_taken_from_it():
    job = make_job("short", bundle="short")
    made = queued_runs(job, 3)
    lifecycle.claim_many([(run.pk, 1) for run in made], "w1@host", 42, "bundle-x")
    lifecycle.cancel(made[0])
    before = JobRun.objects.get(pk=made[1].pk).heartbeat_at

    alive = lifecycle.heartbeat_many([(run.pk, 1) for run in made] + [(made[1].pk, 2)])

    assert alive == {(made[1].pk, 1), (made[2].pk, 1)}
    assert JobRun.objects.get(pk=made[1].pk).heartbeat_at >= before


def test_a_bundles_successes_that_the_database_did_not_take_wait_for_the_next_try(monkeypatch):
    # A flush while the database is away (its restart) keeps the successes it could not record: dropped,
    # their runs stayed running after the bundle ended, and were declared lost and run a second time.
    job = make_job("short", bundle="short")
    made = queued_runs(job, 3)
    claimed = lifecycle.claim_many([(run.pk, 1) for run in made], "w1@host", 42, "bundle-x")
    turns = worker_bundle.Turns("w1@host", "bundle-x", claimed)
    try:
        for one in claimed:
            turns.add(lifecycle.Success(one.run.pk, 1, lifecycle.started_at(one, 0.0), "done", 4, None))
        with monkeypatch.context() as away:
            away.setattr(lifecycle, "succeed_many", database_away)
            with pytest.raises(OperationalError):
                turns.flush()
        turns.flush()
    finally:
        turns.release_all()

    assert [JobRun.objects.get(pk=run.pk).status for run in made] == [RunStatus.SUCCEEDED] * 3
    assert turns.pending == []


def database_away(*args):
    raise OperationalError("connection refused: the database is restarting")


def test_a_failed_run_of_a_bundle_records_its_start_then_its_failure():
    job = make_job("short", bundle="short")
    (run,) = queued_runs(job, 1)
    (claimed,) = lifecycle.claim_many([(run.pk, 1)], "w1@host", 42, "bundle-x")
    started = lifecycle.started_at(claimed, 1.5)

    lifecycle.mark_started(run.pk, 1, started)
    assert lifecycle.record_failure(run.pk, 1, "boom") == RunStatus.FAILED

    run.refresh_from_db()
    assert run.started_at == started and JobAttempt.objects.get(run=run).started_at == started
    assert RunEnd.objects.get(run_id=run.pk).seconds == pytest.approx((run.finished_at - started).total_seconds())


def test_the_api_and_the_run_page_say_a_run_ran_in_a_bundle(client):
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    job = make_job("short", bundle="short")
    made = queued_runs(job, 2)
    claimed = lifecycle.claim_many([(run.pk, 1) for run in made], "w1@host", 42, "bundle-7-1-2")
    lifecycle.succeed_many([lifecycle.Success(c.run.pk, 1, c.claimed_at, "", 0, None) for c in claimed])
    staff = User.objects.create_user("staff", password="x", is_staff=True, is_superuser=True)
    api = APIClient()
    api.force_authenticate(staff)

    body = api.get(f"/api/runs/{made[0].pk}/").json()
    assert [(a["number"], a["task_id"], a["worker"]) for a in body["attempts"]] == [(1, "bundle-7-1-2", "w1@host")]
    client.force_login(staff)
    assert "in bundle bundle-7-1-2" in client.get(f"/runs/{made[0].pk}/").content.decode()
