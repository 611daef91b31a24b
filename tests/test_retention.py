"""Retention: what a prune keeps (unfinished runs, the newest M, the recent ones), what it takes with
a run (attempts, task results), and that the pages and the API stay right afterwards."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from django_celery_results.models import TaskResult

from jobs.definitions.jobs import save_job
from jobs.models import TERMINAL_STATUSES, AttemptOutcome, Job, JobAttempt, JobRun, RunStatus
from jobs.operations import retention
from notifications.models import Channel, Delivery

from .api_personas import make_personas
from .conftest import wait_for

NOT_TERMINAL = [RunStatus.PENDING, RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.RETRYING]


def make_job(name="nightly", **fields):
    return save_job(Job(name=name, kind="callable", target="builtin.noop", **fields), {"type": "manual"})


def make_run(job, days_ago, status=RunStatus.SUCCEEDED, attempt=1):
    moment = timezone.now() - timedelta(days=days_ago)
    finished = moment + timedelta(seconds=1) if status in TERMINAL_STATUSES else None
    run = JobRun.objects.create(job=job, status=status, scheduled_for=moment, created_at=moment, queued_at=moment,
                                started_at=moment, finished_at=finished, attempt=attempt, max_attempts=attempt)
    Job.objects.filter(pk=job.pk).update(last_run=run)
    return run


def ids(queryset):
    return set(queryset.values_list("pk", flat=True))


@pytest.mark.django_db
def test_it_never_deletes_an_unfinished_run_however_old():
    job = make_job(retention_days=1, retention_min_runs=1)
    unfinished = [make_run(job, 100 - i, status) for i, status in enumerate(NOT_TERMINAL)]
    finished = [make_run(job, 50 - i, status) for i, status in enumerate(sorted(TERMINAL_STATUSES))]
    newest = make_run(job, 0)

    report = retention.prune()

    assert ids(job.runs) == {r.pk for r in unfinished} | {newest.pk}
    assert report.runs == len(finished)


@pytest.mark.django_db
def test_it_keeps_the_newest_runs_of_a_job_whatever_their_age():
    job = make_job(retention_days=1, retention_min_runs=3)
    runs = [make_run(job, 40 - i) for i in range(10)]  # all older than a day, oldest first

    retention.prune()

    assert ids(job.runs) == {r.pk for r in runs[-3:]}


@pytest.mark.django_db
def test_it_keeps_runs_younger_than_the_retention_days():
    job = make_job(retention_days=7, retention_min_runs=1)
    old = [make_run(job, days) for days in (30, 20, 8)]
    recent = [make_run(job, days) for days in (6, 1, 0)]

    retention.prune()

    assert ids(job.runs) == {r.pk for r in recent}
    assert not JobRun.objects.filter(pk__in=[r.pk for r in old]).exists()


@pytest.mark.django_db
def test_it_uses_the_global_defaults_for_a_job_without_a_policy(settings):
    settings.JOBS_RETENTION_DAYS, settings.JOBS_RETENTION_MIN_RUNS = 10, 2
    defaults = make_job("defaults")
    own = make_job("own", retention_days=100)
    runs = {job.name: [make_run(job, days) for days in (50, 40, 30, 5)] for job in (defaults, own)}

    report = retention.prune()

    assert ids(defaults.runs) == {r.pk for r in runs["defaults"][2:]}
    assert own.runs.count() == 4
    assert report.per_job == {"defaults": 2}


@pytest.mark.django_db
def test_it_never_deletes_the_jobs_last_run():
    job = make_job(retention_days=1, retention_min_runs=1)
    last = make_run(job, 90)
    newer = make_run(job, 80)
    Job.objects.filter(pk=job.pk).update(last_run=last)  # e.g. a run-now row created after a backfill

    retention.prune()

    job.refresh_from_db()
    assert job.last_run_id == last.pk
    assert ids(job.runs) == {last.pk, newer.pk}


@pytest.mark.django_db
def test_it_deletes_a_runs_attempts_and_task_results_and_keeps_its_deliveries():
    job = make_job(retention_days=1, retention_min_runs=1)
    old = make_run(job, 30, RunStatus.FAILED, attempt=2)
    kept = make_run(job, 0)
    for run in (old, kept):
        for number in range(1, run.attempt + 1):
            JobAttempt.objects.create(run=run, number=number, task_id=f"run-{run.pk}-{number}",
                                      outcome=AttemptOutcome.FAILED)
            TaskResult.objects.create(task_id=f"run-{run.pk}-{number}", status="FAILURE")
    TaskResult.objects.create(task_id="some-other-task", status="SUCCESS")
    channel = Channel.objects.create(name="ops", kind="email", config={"recipients": ["ops@example.com"]})
    delivery = Delivery.objects.create(event="failed", channel=channel, run=old, job=job, dedup_key="failed:x",
                                       payload={"run": {"id": old.pk}})

    report = retention.prune()

    assert report.runs == 1 and report.task_results == 2
    assert list(JobAttempt.objects.values_list("run_id", flat=True)) == [kept.pk]
    assert set(TaskResult.objects.values_list("task_id", flat=True)) == {f"run-{kept.pk}-1", "some-other-task"}
    delivery.refresh_from_db()
    assert delivery.run_id is None and delivery.payload["run"]["id"] == old.pk


@pytest.mark.django_db
def test_it_deletes_in_batches_of_the_given_size():
    job = make_job(retention_days=1, retention_min_runs=1)
    for days in range(30, 20, -1):
        make_run(job, days)
    make_run(job, 0)

    report = retention.prune(batch_size=3)

    assert (report.runs, report.batches) == (10, 4)
    assert job.runs.count() == 1


@pytest.mark.django_db
def test_the_command_counts_with_dry_run_and_deletes_without_it():
    job = make_job(retention_days=1, retention_min_runs=1)
    for days in (9, 8, 7, 0):
        make_run(job, days)
    other = make_job("other")
    make_run(other, 400)
    make_run(other, 300)

    out = StringIO()
    call_command("runs", "prune", "--dry-run", "--job", "nightly", stdout=out)
    assert out.getvalue().splitlines() == ["nightly: 3", "Would delete 3 runs of 1 jobs (1 checked)."]
    assert JobRun.objects.count() == 6

    out = StringIO()
    call_command("runs", "prune", stdout=out)
    assert out.getvalue().startswith("nightly: 3\nDeleted 3 runs of 1 jobs (2 checked), 0 task results, in ")
    assert job.runs.count() == 1 and other.runs.count() == 2  # "other": the default 100 newest


@pytest.mark.django_db
def test_the_command_refuses_an_unknown_job_and_a_bad_batch():
    with pytest.raises(CommandError, match="No job named 'nope'"):
        call_command("runs", "prune", "--job", "nope")
    with pytest.raises(CommandError, match="--batch must be at least 1"):
        call_command("runs", "prune", "--batch", "0")


@pytest.mark.django_db
def test_the_api_and_the_pages_stay_right_after_a_prune():
    people = make_personas()
    job = people.job
    job.retention_days, job.retention_min_runs = 7, 2
    job.save()
    gone = [make_run(job, days, RunStatus.FAILED) for days in (40, 30, 20)]
    kept = [make_run(job, days, status) for days, status in ((60, RunStatus.RUNNING), (3, RunStatus.FAILED),
                                                             (2, RunStatus.SUCCEEDED))]
    retention.prune()
    api = people.client(people.owner)

    listed = api.get(f"/api/runs/?job={job.pk}").json()
    assert listed["count"] == 3
    assert {r["id"] for r in listed["results"]} == {r.pk for r in kept}
    assert api.get(f"/api/runs/{gone[0].pk}/").status_code == 404
    assert api.get(f"/api/jobs/{job.pk}/").json()["last_run"]["id"] == kept[-1].pk
    pages = Client()
    pages.force_login(people.owner)
    for url in ("/", "/jobs/", f"/jobs/{job.pk}/", "/runs/", f"/runs/{kept[0].pk}/"):
        assert pages.get(url).status_code == 200, url
    assert pages.get(f"/runs/{gone[0].pk}/").status_code == 404


@pytest.mark.django_db
def test_the_api_takes_a_jobs_retention_and_rejects_a_bad_one():
    people = make_personas()
    api = people.client(people.owner)
    url = f"/api/jobs/{people.job.pk}/"

    assert api.patch(url, {"retention_days": 90, "retention_min_runs": 10}, format="json").status_code == 200
    people.job.refresh_from_db()
    assert people.job.effective_retention == (90, 10)
    answer = api.patch(url, {"retention_days": 0, "retention_min_runs": -1}, format="json")
    assert answer.status_code == 400
    assert set(answer.json()) == {"retention_days", "retention_min_runs"}


def test_the_periodic_pass_prunes_through_beat_and_a_real_worker(processes):
    job = make_job(retention_days=1, retention_min_runs=1)
    old = [make_run(job, days) for days in (9, 8)]
    unfinished = make_run(job, 7, RunStatus.RUNNING)
    newest = make_run(job, 0)
    TaskResult.objects.create(task_id=f"run-{old[0].pk}-1", status="SUCCESS")
    env = {"JOBS_RETENTION_INTERVAL_SECONDS": "1"}
    processes.worker(**env)
    processes.beat(**env)

    wait_for(lambda: not JobRun.objects.filter(pk__in=[r.pk for r in old]).exists(), timeout=60,
             message="the periodic retention pass")

    assert ids(job.runs) == {unfinished.pk, newest.pk}
    assert not TaskResult.objects.filter(task_id=f"run-{old[0].pk}-1").exists()



@pytest.mark.django_db
def test_a_pass_over_many_jobs_deletes_what_each_policy_lets_go(monkeypatch):
    monkeypatch.setattr(retention, "JOB_BATCH", 3)  # several batches of jobs
    expected_left = {}
    for n in range(8):
        # Job n keeps runs for n + 2 days and at least n % 4 + 1 runs; a run a day for 21 days,
        # half a day off the cutoffs.
        job = make_job(f"job-{n}", retention_days=n + 2, retention_min_runs=n % 4 + 1)
        ages = [days + 0.5 for days in range(20, -1, -1)]  # oldest first
        runs = [make_run(job, age) for age in ages]
        kept_by_age = [run for age, run in zip(ages, runs, strict=True) if age < n + 2]
        kept = kept_by_age if len(kept_by_age) >= n % 4 + 1 else runs[-(n % 4 + 1):]
        expected_left[job.name] = {run.pk for run in kept}
    busy = make_job("busy", retention_days=1, retention_min_runs=1)
    still_running = make_run(busy, 30, RunStatus.RUNNING)
    make_run(busy, 0)

    assert retention.prune(dry_run=True).per_job == {name: 21 - len(left) for name, left in expected_left.items()}
    report = retention.prune(batch_size=4)

    assert {name: ids(JobRun.objects.filter(job__name=name)) for name in expected_left} == expected_left
    assert JobRun.objects.filter(pk=still_running.pk).exists()
    assert report.per_job == {name: 21 - len(left) for name, left in expected_left.items()}
    assert report.runs == sum(report.per_job.values()) and report.jobs == 9


@pytest.mark.postgres("one query for many jobs is the PostgreSQL path; other databases ask per job")
@pytest.mark.django_db
def test_a_pass_reads_many_jobs_at_once(django_assert_max_num_queries):
    for n in range(50):
        make_run(make_job(f"job-{n}", retention_days=5, retention_min_runs=1), 1)
    with django_assert_max_num_queries(10):  # was two per job
        report = retention.prune()
    assert (report.jobs, report.runs) == (50, 0)


@pytest.mark.postgres("row locks and lock_timeout")
@pytest.mark.django_db(transaction=True)
def test_a_batch_that_meets_a_lock_is_left_for_the_next_pass_and_the_others_go():
    import psycopg
    from django.db import connection

    job = make_job(retention_days=1, retention_min_runs=1)
    old = [make_run(job, days) for days in range(30, 20, -1)]
    make_run(job, 0)
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                         dbname=db["NAME"]) as holder:
        holder.execute(f"SELECT id FROM {JobRun._meta.db_table} WHERE id = %s FOR UPDATE", [old[0].pk])
        report = retention.prune(batch_size=3)
        assert report.skipped_batches == 1
        assert ids(job.runs.filter(created_at__lt=timezone.now() - timedelta(days=1))) >= {old[0].pk}
        assert report.runs == len(old) - len(ids(job.runs)) + 1
        holder.rollback()
    retention.prune(batch_size=3)
    assert job.runs.count() == 1
