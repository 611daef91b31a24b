"""On-time reports (jobs.operations.reports): every figure against what the test made, slot by slot,
with its own clock; the per-day counts the same whether folded from the ends or counted again from
the runs; the slots a schedule expected against a minute-by-minute walk (and the DST oracle on the
nights the clocks change); the API's answers, CSV and refusals."""

import csv
import io
import math
import random
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.lifecycle import days as day_counts
from jobs.models import AttemptOutcome, Job, JobAttempt, JobDayFigures, JobRun, RunEnd, RunStatus, RunTrigger
from jobs.operations import reports

from . import dst_oracle
from .api_personas import make_personas
from .test_rollup import end_every_way


def hourly_job(name="hourly", created_days_ago=3, **fields):
    job = save_job(Job(name=name, kind="callable", target="builtin.noop", **fields),
                   {"type": "cron", "cron": "0 * * * *", "timezone": "UTC"})
    today = timezone.now().astimezone(UTC).date()
    created = datetime.combine(today - timedelta(days=created_days_ago), time(), UTC)
    Job.objects.filter(pk=job.pk).update(created_at=created)
    job.refresh_from_db()
    return job


def ended_run(job, slot, status, start_delay=None, seconds=None, reason=""):
    """A scheduled run of ``slot`` as the worker leaves it: started ``start_delay`` seconds after its
    slot, running ``seconds``, with its first attempt."""
    started = slot + timedelta(seconds=start_delay) if start_delay is not None else None
    finished = started + timedelta(seconds=seconds) if started and seconds is not None else slot
    run = JobRun.objects.create(job=job, status=status, trigger=RunTrigger.SCHEDULE, scheduled_for=slot,
                                queued_at=slot, started_at=started, finished_at=finished, reason=reason,
                                max_attempts=1)
    if started is not None:
        outcome = {RunStatus.SUCCEEDED: AttemptOutcome.SUCCEEDED, RunStatus.TIMED_OUT: AttemptOutcome.TIMED_OUT}.get(
            status, AttemptOutcome.FAILED)
        JobAttempt.objects.create(run=run, number=1, outcome=outcome, started_at=started, finished_at=finished)
    return run


@pytest.mark.django_db
def test_a_jobs_report_counts_what_became_of_each_slot():
    job = hourly_job(start_deadline_seconds=120, sla_seconds=30)
    now = timezone.now()
    first_day = now.astimezone(UTC).date() - timedelta(days=2)
    start = datetime.combine(first_day, time(), UTC)
    grace = timedelta(seconds=settings.JOBS_MISFIRE_GRACE_SECONDS + settings.JOBS_TICK_SECONDS * 5)
    # The test's own clock: every hour from the first day's midnight to now.
    slots = [start + timedelta(hours=h) for h in range(int((now - start).total_seconds() // 3600) + 1)
             if start + timedelta(hours=h) < now]
    rng = random.Random(7)
    expect = {"with_run": 0, "on_time": 0, "within_sla": 0, "skipped": 0, "missed": 0, "due": 0, "failed": 0}
    durations = []
    for slot in slots:
        kind = rng.choice(["fast", "slow-start", "over-sla", "failed", "skipped", "missing"])
        if kind == "missing":
            expect["due" if slot >= now - grace else "missed"] += 1
            continue
        expect["with_run"] += 1
        if kind == "skipped":
            ended_run(job, slot, RunStatus.SKIPPED, reason="missed: catch-up policy 'none'")
            expect["skipped"] += 1
            continue
        delay = 5 if kind != "slow-start" else 600
        seconds = rng.choice([1.0, 2.5, 10.0]) if kind != "over-sla" else 45.0
        status = RunStatus.FAILED if kind == "failed" else RunStatus.SUCCEEDED
        ended_run(job, slot, status, start_delay=delay, seconds=seconds)
        durations.append(seconds)
        expect["on_time"] += delay <= 120
        expect["within_sla"] += status == RunStatus.SUCCEEDED and seconds <= 30
        expect["failed"] += status == RunStatus.FAILED
    lifecycle.recount_ends()

    report = reports.job_report(job, 3, now=now)

    assert report["slots_expected"] == len(slots)
    assert report["slots_with_run"] == expect["with_run"]
    assert report["missed"] == expect["missed"]
    assert report["due"] == expect["due"]
    assert report["started_on_time"] == expect["on_time"]
    assert report["finished_within_sla"] == expect["within_sla"]
    assert report["skipped"] == expect["skipped"]
    assert report["skipped_by_reason"] == ({"missed: catch-up policy 'none'": expect["skipped"]}
                                          if expect["skipped"] else {})
    assert report["outcomes"]["failed"] == expect["failed"]
    assert report["duration"]["runs"] == len(durations)
    ordered = sorted(durations)
    for share, key in ((0.5, "p50_seconds"), (0.95, "p95_seconds")):
        true = ordered[math.ceil(share * len(ordered)) - 1]
        # The histogram's precision: a bucket is 2^(1/4) wide, its middle within 2^(1/8) of any value in it.
        assert true / 2 ** 0.125 <= report["duration"][key] <= true * 2 ** 0.125
    by_day = {row["day"]: row for row in report["daily"]}
    assert sum(row["expected"] for row in report["daily"]) == len(slots)
    for day in {slot.date() for slot in slots}:
        assert by_day[day.isoformat()]["expected"] == sum(slot.date() == day for slot in slots)


def day_rows():
    """Every count of the jobs' days: (job id, day, measure, count), sorted."""
    return sorted((job_id, day, measure, count) for job_id, day, counts in
                  JobDayFigures.objects.values_list("job_id", "day", "counts") for measure, count in counts.items())


@pytest.mark.django_db
def test_the_days_folded_from_the_ends_are_the_days_counted_again_from_the_runs():
    job = hourly_job(max_retries=0, max_lost_attempts=0, start_deadline_seconds=60, sla_seconds=3600)
    end_every_way(job)
    ends = dict(RunEnd.objects.values_list("run_id", "seconds"))
    # Two ends a batch: each batch after the first adds to the rows the ones before wrote.
    while lifecycle.fold_ends(batch=2):
        pass
    folded = day_rows()
    assert any(measure.startswith(day_counts.DURATION) for _, _, measure, _ in folded)
    assert ("slots" in {measure for _, _, measure, _ in folded})
    assert JobDayFigures.objects.count() == len({(job_id, day) for job_id, day, _, _ in folded})
    if connection.vendor == "postgresql":  # the fold's statement, measure by measure as Python makes them
        JobDayFigures.objects.all().delete()
        day_counts.add_days_in_python(ends)
        assert day_rows() == folded

    lifecycle.recount_ends()

    counted = day_rows()
    if connection.vendor == "postgresql":
        assert counted == folded
    else:  # SQLite's julianday keeps milliseconds only: these runs' millisecond durations may change bucket
        def without_buckets(rows):
            return [row for row in rows if not row[2].startswith(day_counts.DURATION)]

        def timed(rows):
            return sum(row[3] for row in rows if row[2].startswith(day_counts.DURATION))

        assert without_buckets(counted) == without_buckets(folded)
        assert timed(counted) == timed(folded)


@pytest.mark.parametrize("expression", ["*/7 9-17 * * 1-5", "0 0 L * *", "30 2 * * *", "* * * * *", "5 4 1,15 * 0"])
def test_a_days_slots_from_the_cron_fields_are_a_walk_through_the_day(expression):
    for offset in range(0, 120, 5):
        day = date(2026, 1, 1) + timedelta(days=offset)
        start, walked = datetime.combine(day, time()), 0
        cursor = croniter(expression, start - timedelta(seconds=1))
        while cursor.get_next(datetime) < start + timedelta(days=1):
            walked += 1
        assert reports.cron_slots_on(expression, day) == walked, day


@pytest.mark.django_db
@pytest.mark.parametrize("night", [date(2027, 3, 28), date(2027, 10, 31)])
def test_expected_slots_on_a_dst_night_are_the_oracles(night):
    job = save_job(Job(name="berlin", kind="callable", target="builtin.noop"),
                   {"type": "cron", "cron": "*/15 1-3 * * *", "timezone": "Europe/Berlin"})
    zone = ZoneInfo("Europe/Berlin")
    first, last = night - timedelta(days=1), night + timedelta(days=1)
    Job.objects.filter(pk=job.pk).update(created_at=datetime(2027, 1, 1, tzinfo=UTC))
    job.refresh_from_db()
    found = reports.expected_by_day(job, first, last, now=datetime(2028, 1, 1, tzinfo=UTC))
    for day in (first, night, last):
        start = datetime.combine(day, time(), zone).astimezone(UTC)
        end = datetime.combine(day + timedelta(days=1), time(), zone).astimezone(UTC)
        assert found[day] == len(dst_oracle.slots_between("*/15 1-3 * * *", "Europe/Berlin", start, end)), day


@pytest.mark.django_db
def test_the_api_answers_a_jobs_report_its_csv_and_a_tags_sum_and_refuses_the_rest():
    personas = make_personas()
    job = personas.job
    other = save_job(Job(name="second", kind="callable", target="builtin.noop", owner=personas.owner,
                         group=personas.team, tags=["reports"]),
                     {"type": "interval", "every_seconds": 3600})
    now = timezone.now()
    for each in (job, other):
        ended_run(each, now - timedelta(hours=5), RunStatus.SUCCEEDED, start_delay=1, seconds=2)
    ended_run(other, now - timedelta(hours=6), RunStatus.FAILED, start_delay=1, seconds=2)
    lifecycle.recount_ends()
    owner = personas.client(personas.owner)

    answer = owner.get(f"/api/jobs/{job.pk}/report/?days=7")
    assert answer.status_code == 200, answer.content
    assert answer.json()["slots_with_run"] == 1 and answer.json()["job"] == job.pk
    assert len(answer.json()["daily"]) == 7

    as_csv = owner.get(f"/api/jobs/{job.pk}/report/?days=7&format=csv")
    assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.content.decode())))
    assert len(rows) == 7 and sum(int(row["with_run"]) for row in rows) == 1
    assert owner.get(f"/api/jobs/{job.pk}/report/?days=7", HTTP_ACCEPT="text/csv")["Content-Type"].startswith(
        "text/csv")

    tag = owner.get("/api/reports/?tag=reports&days=30").json()
    assert tag["slots_with_run"] == 3 and tag["outcomes"]["failed"] == 1 and sorted(tag["jobs"]) == sorted(
        [job.pk, other.pk])
    group = owner.get("/api/reports/?group=team&days=30").json()
    assert group["slots_with_run"] == 3

    outsider = personas.client(personas.outsider)
    assert outsider.get(f"/api/jobs/{job.pk}/report/").status_code == 404
    assert outsider.get("/api/reports/?tag=reports").json()["jobs"] == []
    for bad in ("0", "91", "100000", "x", "1.5", "-3", "9" * 50):
        answer = owner.get(f"/api/jobs/{job.pk}/report/?days={bad}")
        assert answer.status_code == 400 and "days" in answer.json(), bad
    assert owner.get("/api/reports/?days=7").status_code == 400
    assert owner.get("/api/reports/?tag=a&group=b").status_code == 400
    assert owner.get("/api/reports/?group=nobody-has-this").status_code == 404
    assert owner.get("/api/reports/?tag=" + "x" * 500).status_code == 400
    assert personas.client(None).get(f"/api/jobs/{job.pk}/report/").status_code in (401, 403)


@pytest.mark.django_db
def test_the_pages_show_the_report_and_its_heat_map_to_those_who_may_see_the_job():
    from .api_personas import browser

    personas = make_personas()
    job = personas.job
    now = timezone.now()
    ended_run(job, now - timedelta(hours=30), RunStatus.SUCCEEDED, start_delay=1, seconds=2)
    ended_run(job, now - timedelta(hours=54), RunStatus.SUCCEEDED, start_delay=900, seconds=2)
    lifecycle.recount_ends()
    owner = browser(personas.owner)

    detail = owner.get(f"/jobs/{job.pk}/").content.decode()
    assert 'class="heat-map"' in detail and "On-time report" in detail
    report = owner.get(f"/jobs/{job.pk}/report/?days=7")
    assert report.status_code == 200
    text = report.content.decode()
    expected = reports.job_report(job, 7)
    assert f"<th>Slots with a run</th><td>{expected['slots_with_run']}" in text and expected["slots_with_run"] == 2
    assert f"<th>Started on time</th><td>{expected['started_on_time']}" in text and expected["started_on_time"] == 1
    assert text.count("<td class=\"heat-") == 7
    assert owner.get(f"/jobs/{job.pk}/report/?days=zzz").status_code == 200  # falls back to 30 days
    assert "2 runs" in owner.get("/reports/?tag=reports&days=7").content.decode()
    assert owner.get("/reports/?group=team").status_code == 200
    assert owner.get("/reports/?group=nobody").status_code == 404
    assert browser(personas.outsider).get(f"/jobs/{job.pk}/report/").status_code == 404
    assert "nightly-report" not in browser(personas.outsider).get("/reports/?tag=reports").content.decode()
    assert Client().get(f"/jobs/{job.pk}/report/").status_code == 302


@pytest.mark.django_db
def test_a_day_its_calendar_closes_expects_no_slot_and_a_weekend_none_on_business_days():
    from .test_calendars import make_calendar

    now = timezone.now()
    today = now.astimezone(UTC).date()
    closed = today - timedelta(days=2)
    make_calendar("office", {closed: "Closed for the move"})
    job = hourly_job(calendars=["office"])
    workdays = hourly_job(name="workdays", business_days=True)
    first, last = today - timedelta(days=6), today - timedelta(days=1)

    on_calendar = reports.expected_by_day(job, first, last, now)
    on_workdays = reports.expected_by_day(workdays, first, last, now)

    for n in range((last - first).days + 1):
        day = first + timedelta(days=n)
        since = job.created_at.date()
        whole = 24 if day > since else 0 if day < since else 24
        assert on_calendar.get(day, 0) == (0 if day == closed else whole), day
        assert on_workdays.get(day, 0) == (0 if day.weekday() >= 5 else whole), day


@pytest.mark.django_db
def test_a_tags_report_reads_the_audit_trail_once_whatever_its_number_of_jobs(django_assert_max_num_queries):
    for n in range(12):
        hourly_job(name=f"tagged-{n}", tags=["fleet"])
    # As the API and the pages read them: with their schedules.
    jobs = list(Job.objects.filter(name__startswith="tagged-").select_related("crontab", "interval", "clocked"))
    # Half past an hour: in the minute after one of the jobs' slots (the scheduler's grace), the
    # report asks for the runs of that slot too, a fifth query (CI once ran it at such a minute).
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    now -= timedelta(hours=1) if now > timezone.now() else timedelta(0)
    with django_assert_max_num_queries(4):
        report = reports.jobs_report(jobs, 7, now=now)
    assert report["slots_expected"] > 0


@pytest.mark.postgres("migrating back and forth: SQLite's schema editor refuses it inside the test's transaction")
def test_the_migration_packs_the_days_counted_so_far_and_a_job_is_still_deleted(transactional_db):
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("jobs", "0037_ping_queue")], [("jobs", "0038_day_figures")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    job = old.get_model("jobs", "Job").objects.create(name="nightly", kind="callable", target="builtin.noop")
    kept = {(date(2026, 11, 27), "slots"): 24, (date(2026, 11, 27), "succeeded"): 23,
            (date(2026, 11, 27), "d:12"): 23, (date(2026, 11, 28), "slots"): 1, (date(2026, 11, 28), "failed"): 1}
    old.get_model("jobs", "JobDayCounts").objects.bulk_create(
        old.get_model("jobs", "JobDayCounts")(job_id=job.pk, day=day, measure=measure, count=count)
        for (day, measure), count in kept.items())
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        now = executor.loader.project_state(after).apps
        assert sorted(now.get_model("jobs", "JobDayFigures").objects.values_list("day", "counts")) == [
            (date(2026, 11, 27), {"slots": 24, "succeeded": 23, "d:12": 23}),
            (date(2026, 11, 28), {"slots": 1, "failed": 1})]
        assert day_counts.read_days([job.pk], date(2026, 11, 27), date(2026, 11, 28)) == {
            date(2026, 11, 27): {"slots": 24, "succeeded": 23, "d:12": 23}, date(2026, 11, 28): {"slots": 1, "failed": 1}}

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        old = executor.loader.project_state(before).apps
        assert {(row.day, row.measure): row.count for row in old.get_model("jobs", "JobDayCounts").objects.all()} == kept

        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # The old table stays, with no foreign key: the job goes, with its new rows.
        Job.objects.get(pk=job.pk).delete()
        assert not JobDayFigures.objects.exists()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        # The old table is no model's: the test database's flush leaves it, and a later test that
        # migrates back (test_migrations_squashed) would give it its foreign key again over these rows.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM jobs_jobdaycounts")
