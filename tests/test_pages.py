"""The built-in pages: who sees what, the buttons, the live tail, and a bounded number of queries."""

import html
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import lifecycle
from jobs.coordination import leases
from jobs.definitions.jobs import save_job
from jobs.models import TERMINAL_STATUSES, AttemptOutcome, Job, JobAttempt, JobRun, RunEnd, RunStatus
from jobs.pages import figures
from notifications.models import Channel, Delivery

pytestmark = pytest.mark.django_db


def client_for(user, **kwargs):
    client = Client(**kwargs)
    client.force_login(user)
    return client


def make_run(job, status=RunStatus.SUCCEEDED, ago=60, seconds=2.0, **fields):
    now = timezone.now()
    started = now - timedelta(seconds=ago)
    finished = started + timedelta(seconds=seconds) if status in (
        RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT) else None
    fields.setdefault("created_at", started)
    run = JobRun.objects.create(
        job=job, status=status, scheduled_for=started, queued_at=started, started_at=started,
        finished_at=finished, **fields,
    )
    if status in TERMINAL_STATUSES:  # as the lifecycle records an end, and the leader folds it
        RunEnd.record(run, status, finished or started)
        lifecycle.fold_ends()
    return run


def make_job(name, **fields):
    schedule = fields.pop("schedule", {"type": "interval", "every_seconds": 60})
    return save_job(Job(name=name, kind=fields.pop("kind", "callable"), target=fields.pop("target", "builtin.noop"),
                        **fields), schedule)


# --- who sees what


def test_it_redirects_anonymous_visitors_to_the_login_page(people):
    run = make_run(people.job)
    for url in ["/", "/jobs/", f"/jobs/{people.job.pk}/", "/runs/", f"/runs/{run.pk}/", f"/runs/{run.pk}/tail/"]:
        response = Client().get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_it_logs_a_user_in_with_the_login_page(people):
    people.teammate.set_password("s3cret-pass")
    people.teammate.save()
    client = Client()
    assert "Log in" in client.get("/accounts/login/").text
    response = client.post("/accounts/login/", {"username": "teammate", "password": "s3cret-pass", "next": "/jobs/"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert "nightly-report" in client.get("/jobs/").text


def test_it_answers_404_to_an_outsider_and_leaves_others_jobs_out_of_the_lists(people):
    run = make_run(people.job, output="secret output")
    client = client_for(people.outsider)
    for url in [f"/jobs/{people.job.pk}/", f"/runs/{run.pk}/", f"/runs/{run.pk}/tail/"]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/jobs/{people.job.pk}/run/").status_code == 404
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 404
    for url in ["/", "/jobs/", "/runs/"]:
        assert "nightly-report" not in client.get(url).text, url
    assert not JobRun.objects.exclude(pk=run.pk).exists()


def test_it_shows_a_teammate_and_staff_the_jobs_and_runs_of_the_group(people):
    run = make_run(people.job, output="hello from the job")
    for user in (people.teammate, people.staff):
        client = client_for(user)
        assert "nightly-report" in client.get("/jobs/").text
        assert f"#{run.pk}" in client.get("/runs/").text
        assert "nightly-report" in client.get(f"/jobs/{people.job.pk}/").text
        assert "hello from the job" in client.get(f"/runs/{run.pk}/").text


# --- actions


def test_it_runs_a_job_now_from_its_page(people):
    client = client_for(people.teammate)
    response = client.post(f"/jobs/{people.job.pk}/run/", follow=True)
    run = JobRun.objects.get(job=people.job)
    assert response.redirect_chain[-1][0] == f"/runs/{run.pk}/"
    assert run.status == RunStatus.QUEUED and run.trigger == "manual" and run.triggered_by == people.teammate
    assert f"Run now: run #{run.pk} of nightly-report was created" in response.text


def test_it_pauses_and_resumes_a_job_from_its_page(people):
    client = client_for(people.owner)
    client.post(f"/jobs/{people.job.pk}/pause/")
    people.job.refresh_from_db()
    assert not people.job.enabled
    assert 'id="resume"' in client.get(f"/jobs/{people.job.pk}/").text

    client.post(f"/jobs/{people.job.pk}/resume/")
    people.job.refresh_from_db()
    assert people.job.enabled and people.job.next_run_at > timezone.now()
    assert 'id="pause"' in client.get(f"/jobs/{people.job.pk}/").text


def test_it_only_acts_on_a_post_that_carries_the_csrf_token(people):
    client = client_for(people.owner, enforce_csrf_checks=True)
    assert client.post(f"/jobs/{people.job.pk}/pause/").status_code == 403
    assert client.get(f"/jobs/{people.job.pk}/pause/").status_code == 405
    people.job.refresh_from_db()
    assert people.job.enabled

    client.get(f"/jobs/{people.job.pk}/")
    token = client.cookies[settings.CSRF_COOKIE_NAME].value
    assert client.post(f"/jobs/{people.job.pk}/pause/", {"csrfmiddlewaretoken": token}).status_code == 302
    people.job.refresh_from_db()
    assert not people.job.enabled


def test_it_keeps_command_jobs_buttons_for_users_who_may_manage_them(people):
    job = make_job("shell-job", kind="command", target="echo hi", owner=people.owner, group=people.team)
    owner = client_for(people.owner)
    assert 'id="run-now"' not in owner.get(f"/jobs/{job.pk}/").text
    assert owner.post(f"/jobs/{job.pk}/run/").status_code == 403
    assert not job.runs.exists()

    assert client_for(people.staff).post(f"/jobs/{job.pk}/run/").status_code == 403  # staff alone is not enough
    assert client_for(people.runner).post(f"/jobs/{job.pk}/run/").status_code == 302
    assert job.runs.count() == 1


def test_it_cancels_a_queued_run_from_its_page(people):
    run = make_run(people.job, status=RunStatus.QUEUED)
    client = client_for(people.owner)
    assert 'id="cancel"' in client.get(f"/runs/{run.pk}/").text
    response = client.post(f"/runs/{run.pk}/cancel/", follow=True)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert f"Run #{run.pk} is cancelled." in response.text
    assert 'id="cancel"' not in response.text


# --- what the pages show


def test_it_shows_a_runs_output_attempts_deliveries_and_flower_link(people):
    run = make_run(people.job, status=RunStatus.FAILED, output="line one\nline two", error="RuntimeError: boom",
                   attempt=2, max_attempts=2, worker="w1@host")
    JobAttempt.objects.create(run=run, number=1, task_id=f"run-{run.pk}-1", worker="w0@host", pid=4242,
                              outcome=AttemptOutcome.FAILED, error="first failure",
                              traceback="Traceback (most recent call last):\n  first", finished_at=timezone.now())
    JobAttempt.objects.create(run=run, number=2, task_id=f"run-{run.pk}-2", worker="w1@host", pid=4343,
                              outcome=AttemptOutcome.FAILED, error="RuntimeError: boom", finished_at=timezone.now())
    channel = Channel.objects.create(name="ops-mail", kind="email", config={"recipients": ["ops@example.com"]})
    Delivery.objects.create(event="failed", channel=channel, run=run, job=people.job, status="sent",
                            dedup_key=f"run:{run.pk}:failed")

    text = client_for(people.owner).get(f"/runs/{run.pk}/").text
    for expected in ["line one\nline two", "RuntimeError: boom", "Attempt 1", "Attempt 2", "w0@host", "pid 4242",
                     "first failure", "Traceback (most recent call last)", "ops-mail", "Run failed (final)"]:
        assert expected in text, expected
    assert 'id="cancel"' not in text
    assert "data-tail" not in text
    # Flower's basic auth is the operator's: only staff see links to it.
    assert "Flower" not in text
    assert f"{settings.FLOWER_URL}/task/run-{run.pk}-2" in client_for(people.staff).get(f"/runs/{run.pk}/").text


def test_it_returns_the_output_and_status_from_the_live_tail(people):
    run = make_run(people.job, status=RunStatus.RUNNING, output="partial output", worker="w1@host")
    client = client_for(people.teammate)
    assert f'data-tail="/runs/{run.pk}/tail/"' in client.get(f"/runs/{run.pk}/").text
    data = client.get(f"/runs/{run.pk}/tail/").json()
    assert data["status"] == "running" and data["terminal"] is False and data["output"] == "partial output"
    assert "partial output" in data["html"]

    JobRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, output="all output",
                                            finished_at=timezone.now())
    data = client.get(f"/runs/{run.pk}/tail/").json()
    assert (data["status"], data["terminal"], data["output"]) == ("succeeded", True, "all output")


def test_it_shows_the_schedule_next_ten_slots_in_the_jobs_timezone_and_policies(people):
    text = client_for(people.owner).get(f"/jobs/{people.job.pk}/").text
    assert "Europe/Berlin" in text
    assert text.count("03:00:00 CE") == 10  # CET or CEST, never UTC
    assert "Run every missed slot" not in text and "Run the most recent missed slot" in text


def test_it_draws_durations_with_the_sla_line_and_the_success_rate(people):
    Job.objects.filter(pk=people.job.pk).update(sla_seconds=5)
    for i, (status, seconds) in enumerate([("succeeded", 2), ("succeeded", 3), ("failed", 9), ("succeeded", 4)]):
        make_run(people.job, status=status, ago=600 - i * 60, seconds=seconds)
    text = client_for(people.owner).get(f"/jobs/{people.job.pk}/").text
    assert 'class="sla"' in text and "SLA 5.0 s" in text
    assert text.count("<circle") == 4
    assert '<strong class="rate-week">75%</strong>' in text
    # In the job's timezone (Europe/Berlin), with UTC beside it on each point.
    chart = text[text.index('<svg class="chart"'):text.index("</svg>", text.index('<svg class="chart"'))]
    assert re.search(r'class="tick"[^>]*>\d{4}-\d\d-\d\d \d\d:\d\d CES?T<', chart) and "UTC<" not in chart
    assert re.search(r"<title>[^<]* CES?T \(\d\d:\d\d:\d\d UTC\) · ", chart)


def test_it_filters_jobs_by_name_kind_tag_enabled_and_last_run_status(people):
    failing = make_job("failing-export", owner=people.owner, tags=["exports"])
    paused = make_job("paused-cleanup", owner=people.owner, enabled=False)
    Job.objects.filter(pk=failing.pk).update(last_run=make_run(failing, status=RunStatus.FAILED))
    client = client_for(people.owner)

    def names(query):
        text = client.get(f"/jobs/?{query}").text
        return {name for name in ("nightly-report", "failing-export", "paused-cleanup") if f">{name}</a>" in text}

    assert names("q=export") == {"failing-export"}
    assert names("tag=reports") == {"nightly-report"}
    assert names("enabled=no") == {paused.name}
    assert names("status=failed") == {"failing-export"}
    assert names("status=never") == {"nightly-report", "paused-cleanup"}
    assert names("kind=command") == set()


def test_it_shows_counts_running_runs_failures_upcoming_queues_leader_and_workers(people, redis_client):
    Job.objects.filter(pk=people.job.pk).update(sla_seconds=10)
    make_run(people.job, status=RunStatus.RUNNING, ago=30, worker="busy@host")
    failed = make_run(people.job, status=RunStatus.FAILED, ago=300, error="it broke badly")
    JobAttempt.objects.create(run=failed, number=1, task_id="t", worker="w7@host", outcome="failed")
    redis_client.rpush(settings.JOBS_DEFAULT_QUEUE, "a", "b", "c")
    leases.take(settings.JOBS_LEADER_KEY, "beat-node-1", ttl=60)

    response = client_for(people.teammate).get("/")
    text = response.text
    assert [c for c in response.context["counts"] if c[1]] == [("running", 1), ("failed", 1)]
    for expected in ["busy@host", "over", "it broke badly", "nightly-report"]:
        assert expected in text, expected
    assert 'data-refresh="/?fragment=1"' in text
    # The system box (queues, leader, workers) is for staff only.
    for unseen in ["System", "beat-node-1", "w7@host", "queue-depth"]:
        assert unseen not in text, unseen

    text = client_for(people.staff).get("/").text
    for expected in ["beat-node-1", "w7@host", 'class="queue-depth">3<']:
        assert expected in text, expected
    fragment = client_for(people.staff).get("/?fragment=1").text
    assert "beat-node-1" in fragment and "<nav" not in fragment


def test_it_colours_a_status_tile_only_when_its_count_is_not_zero(people):
    make_run(people.job, status=RunStatus.FAILED, ago=300)
    text = client_for(people.owner).get("/").text
    assert 'class="count s-failed"' in text
    assert 'class="count zero" href="/runs/?status=succeeded"' in text and "s-succeeded" not in text


def test_it_shows_dispatch_lag_per_queue_and_sla_overruns(people, redis_client):
    Job.objects.filter(pk=people.job.pk).update(sla_seconds=10)
    slow = make_run(people.job, ago=120, seconds=45)
    make_run(people.job, ago=60, seconds=3)  # within its SLA
    late = make_run(people.job, ago=30)
    JobRun.objects.filter(pk=late.pk).update(scheduled_for=late.started_at - timedelta(seconds=4))

    text = client_for(people.staff).get("/").text

    overruns = text[text.index("SLA overruns, last 24 hours"):text.index("Upcoming runs")]
    assert f"#{slow.pk}" in overruns and "45 s" in overruns
    assert overruns.count('class="over-sla"') == 1
    assert 'class="dispatch-lag">4.0 s' in text


def test_it_says_so_when_no_scheduler_leads(people, redis_client):
    assert "No scheduler is leading" in client_for(people.staff).get("/").text


# --- bounded queries


@pytest.fixture
def many_jobs(people):
    jobs = [make_job(f"job-{i:02d}", owner=people.owner, group=people.team, tags=["bulk"],
                     schedule={"type": "cron", "cron": "*/5 * * * *", "timezone": "UTC"} if i % 2 else None)
            for i in range(30)]
    for job in jobs:
        last = [make_run(job, status=s, ago=3000 - n * 60, seconds=n + 1)
                for n, s in enumerate(["succeeded", "failed", "succeeded", "running"])][-1]
        Job.objects.filter(pk=job.pk).update(last_run=last)
    return jobs


def test_it_lists_jobs_with_a_bounded_number_of_queries(people, many_jobs, django_assert_max_num_queries):
    client = client_for(people.teammate)
    with django_assert_max_num_queries(8):
        text = client.get("/jobs/").text
    assert text.count('class="spark"') == 30 and text.count("67%") == 30


def test_it_renders_the_overview_job_detail_and_runs_with_bounded_queries(
        people, many_jobs, redis_client, django_assert_max_num_queries):
    client = client_for(people.teammate)
    client.get("/")  # the session and the user, once
    # the runs active now and those that ended: two; the user's groups; the newest failures and SLA
    # candidates of the user's jobs, job by job: their ids, then the runs (keyset.first); no system
    # box (the leader's lease, the watchdog's open outage) for a user who is not staff
    with django_assert_max_num_queries(14):
        assert client.get("/").status_code == 200
    # (and 4 of the job page's for its four weeks on time: their day counts, the schedule's last change and
    # the pauses from the audit trail, the runs in flight; then the maintenance windows, read at most once a
    # second, its versions and its open incident: one query each, whatever the number of rows; and one more,
    # the runs since the scheduler's grace, when a slot of the job fell within it: the every-five-minutes
    # job made just before a slot went over 15 in CI on 2026-11-30)
    with django_assert_max_num_queries(16):
        assert client.get(f"/jobs/{many_jobs[1].pk}/").status_code == 200
    with django_assert_max_num_queries(7):
        text = client.get("/runs/").text
    assert text.count("<tr>") == 51  # 50 runs a page and the header
    run = JobRun.objects.filter(job=many_jobs[1]).first()
    with django_assert_max_num_queries(8):
        assert client.get(f"/runs/{run.pk}/").status_code == 200


def test_it_paginates_the_jobs_list_fifty_per_page(people):
    for i in range(51):
        Job.objects.create(name=f"bulk-{i:02d}", kind="callable", target="builtin.noop", owner=people.owner)
    client = client_for(people.owner)
    assert "Page 1 of 2" in client.get("/jobs/").text
    assert ">nightly-report</a>" in client.get("/jobs/?page=2").text


def test_it_keeps_staff_only_links_from_other_users(people):
    assert "/admin/" not in client_for(people.owner).get("/").text
    assert "/admin/" in client_for(people.staff).get("/").text
    assert User.objects.filter(is_staff=True).count() == 1


# --- pages of runs, by position


def run_ids(text):
    return [int(pk) for pk in re.findall(r'<td><a href="/runs/(\d+)/">', text)]


def link(text, to):
    found = re.search(rf'href="(\?[^"]*{to}=[^"]*)"', text)
    return html.unescape(found.group(1)) if found else None


def test_it_pages_through_runs_by_position_without_counting_them(people):
    start = timezone.now() - timedelta(days=3)
    for i in range(40):  # three runs share each moment: the run id breaks the tie
        for _ in range(3):
            JobRun.objects.create(job=people.job, status=RunStatus.QUEUED, created_at=start + timedelta(minutes=i),
                                  scheduled_for=start + timedelta(seconds=i, microseconds=_))
    newest_first = list(JobRun.objects.order_by("-created_at", "-id").values_list("pk", flat=True))
    client = client_for(people.teammate)

    pages, url = [], "/runs/"
    while url:
        with CaptureQueriesContext(connection) as queries:
            text = client.get(f"/runs/{url if url.startswith('?') else ''}").text
        assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
        pages.append(run_ids(text))
        url = link(text, "older")
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [pk for p in pages for pk in p] == newest_first

    newer = link(text, "newer")
    assert run_ids(client.get(f"/runs/{newer}").text) == pages[1]
    assert "newer=" not in client.get("/runs/").text
    assert run_ids(client.get("/runs/?older=garbage").text) == pages[0]


def test_it_pages_through_a_jobs_history_and_filters_it_by_status(people):
    for i in range(30):
        make_run(people.job, status=RunStatus.FAILED if i % 3 == 0 else RunStatus.QUEUED, ago=3600 - i * 60)
    client = client_for(people.owner)

    first = client.get(f"/jobs/{people.job.pk}/").text
    second = client.get(f"/jobs/{people.job.pk}/{link(first, 'older')}").text
    assert len(run_ids(first)) == 25 and len(run_ids(second)) == 5
    assert link(second, "older") is None
    failed = client.get(f"/jobs/{people.job.pk}/?status=failed").text
    assert sorted(run_ids(failed)) == sorted(people.job.runs.filter(status="failed").values_list("pk", flat=True))


def test_it_counts_at_most_so_many_active_runs_and_says_so(people, redis_client, monkeypatch):
    for ago in (30, 20, 10):
        make_run(people.job, status=RunStatus.QUEUED, ago=ago)
    monkeypatch.setattr(figures, "ACTIVE_CAP", 2)

    response = client_for(people.owner).get("/")
    assert response.context["counts_capped"] is True
    assert dict(response.context["counts"])["queued"] == 2
    assert "<strong>2+</strong><span>queued</span>" in response.text
