"""What a newcomer saw go wrong in the first hour (issue 23), in a real browser against a live server.
No worker runs here: the test moves the runs itself through the lifecycle, as a worker would."""

import re
from datetime import UTC, datetime, timedelta

import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from jobs import lifecycle
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobAttempt, JobRun, RunStatus

from .test_browser import browser_page  # noqa: F401  (the fixture, which needs Chromium)

PASSWORD = "newcomer-pass-1"


def log_in(page, live_server, user, path="/"):
    page.goto(f"{live_server.url}{path}")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button.primary")
    page.wait_for_url(f"**{path}")


def test_it_shows_a_function_jobs_result_after_run_now_without_a_stale_banner(live_server, browser_page):  # noqa: F811
    admin = User.objects.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)
    job = save_job(Job(name="echo", kind="callable", target="builtin.echo", kwargs={"greeting": "hello"}),
                   {"type": "manual"})
    page = browser_page
    log_in(page, live_server, admin, f"/jobs/{job.pk}/")

    page.click("#run-now")
    page.wait_for_url("**/runs/*/")
    run = JobRun.objects.get(job=job)
    assert f"run #{run.pk} of echo was created" in page.inner_text(".messages")
    # What the worker does: claim, then record the function's return value (and no output).
    lifecycle.claim(run.pk, 1, "worker@test", 1)
    lifecycle.record_success(run.pk, 1, result={"args": [], "kwargs": {"greeting": "hello"}})
    page.wait_for_selector("#run-status .s-succeeded", timeout=20_000)

    assert "queued" not in page.inner_text(".messages")
    assert '"greeting": "hello"' in page.inner_text("#result")
    assert page.inner_text("#output") == "(no output)"


def test_it_shows_an_http_jobs_status_and_headers_above_its_body_and_the_whole_runs_time(
        live_server, browser_page):  # noqa: F811
    admin = User.objects.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)
    job = save_job(Job(name="hook", kind="http", target="https://example.com/hook"), {"type": "manual"})
    start = timezone.now() - timedelta(minutes=1)
    run = JobRun.objects.create(
        job=job, status=RunStatus.SUCCEEDED, attempt=2, max_attempts=2, scheduled_for=start,
        started_at=start + timedelta(seconds=2), finished_at=start + timedelta(seconds=2, milliseconds=7),
        output="HTTP 200\n" + "a long body line\n" * 400, result={"status": 200, "headers": {"Content-Type": "text/plain"}})
    JobAttempt.objects.create(run=run, number=1, outcome="failed", started_at=start,
                              finished_at=start + timedelta(seconds=1), error="Unexpected status 503")
    JobAttempt.objects.create(run=run, number=2, outcome="succeeded", started_at=start + timedelta(seconds=2),
                              finished_at=start + timedelta(seconds=2, milliseconds=7))
    page = browser_page
    log_in(page, live_server, admin, f"/runs/{run.pk}/")

    response = page.locator("#result")
    assert response.inner_text() == "HTTP 200\nContent-Type: text/plain"
    assert response.is_visible()
    assert response.bounding_box()["y"] < page.locator("#output").bounding_box()["y"]
    took = page.locator("dt:text('Took') + dd").inner_text()
    assert took == "7 ms this attempt · 2.0 s the whole run (2 attempts)"


def test_why_didnt_it_run_reads_and_answers_in_the_jobs_timezone_with_utc_beside(live_server, browser_page):  # noqa: F811
    admin = User.objects.create_user("admin", password=PASSWORD, is_staff=True, is_superuser=True)
    with time_machine.travel(datetime(2026, 11, 23, 6, 0, tzinfo=UTC), tick=False):
        job = save_job(Job(name="nightly", kind="callable", target="builtin.noop"),
                       {"type": "cron", "cron": "30 0 * * *", "timezone": "Europe/Berlin"})
    page = browser_page
    log_in(page, live_server, admin, f"/jobs/{job.pk}/")

    page.fill("input[name=why]", "2026-11-23T00:30")  # in the box labelled Europe/Berlin
    page.click("form.why button")
    assert page.inner_text(".why-answer") == (
        "Not checked: 2026-11-23 00:30 CET (2026-11-22 23:30 UTC) is before the job was created or its "
        "schedule last changed (2026-11-23 07:00 CET (2026-11-23 06:00 UTC)).")
    first_slot = page.inner_text("ol.slots li >> nth=0")
    assert re.fullmatch(r"\w{3} \d{4}-\d\d-\d\d 00:30:00 CET \(\d{4}-\d\d-\d\d 23:30 UTC\)", first_slot)
    assert page.locator("#audit-trail table.audit th >> nth=0").text_content() == "When (Europe/Berlin)"
    assert page.locator("#versions table.audit th >> nth=1").text_content() == "When (Europe/Berlin)"


def test_flower_is_linked_only_for_those_who_can_open_it(live_server, browser_page):  # noqa: F811
    User.objects.create_user("admin", password=PASSWORD, is_staff=True)
    member = User.objects.create_user("member", password=PASSWORD)
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.locator("a", has_text="Flower").count() == 0  # was href="" here
    log_in(page, live_server, member)
    assert page.locator("nav a", has_text="Flower").count() == 0
    page.click("button.link")  # log out
    log_in(page, live_server, User.objects.get(username="admin"))
    assert page.locator("nav a#flower-link").get_attribute("href").startswith("http")
