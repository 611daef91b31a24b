"""The operator's pages in a real browser: "why didn't it run?", every slot of a range, and a
backfill previewed then confirmed. Screenshots as in test_browser."""

from datetime import UTC, datetime, timedelta

import time_machine
from django.contrib.auth.models import User

from jobs.actions import jobs as actions
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun, RunStatus, RunTrigger

from .test_browser import browser_page, shot  # noqa: F401  (the fixture, which needs Chromium)

DAY = datetime(2026, 11, 20, tzinfo=UTC)


def test_an_operator_finds_why_a_slot_did_not_run_and_backfills_it(live_server, browser_page, shot):  # noqa: F811
    operator = User.objects.create_user("operator", password="operator-pass-1", is_staff=True)
    with time_machine.travel(DAY - timedelta(hours=1), tick=False):
        job = save_job(Job(name="hourly-export", kind="callable", target="builtin.noop"),
                       {"type": "cron", "cron": "0 * * * *", "timezone": "Europe/Berlin"})
    for hour in (0, 1):
        JobRun.objects.create(job=job, scheduled_for=DAY + timedelta(hours=hour), status=RunStatus.SUCCEEDED)
    JobRun.objects.create(job=job, scheduled_for=DAY + timedelta(hours=2), status=RunStatus.SKIPPED,
                          reason="overlap: run #1 was still active")
    with time_machine.travel(DAY + timedelta(hours=2, minutes=30), tick=False):
        actions.pause(actions.Actor(operator, "page", "127.0.0.1", operator.username), job)
    with time_machine.travel(DAY + timedelta(hours=4, minutes=30), tick=False):
        actions.resume(actions.Actor(operator, "page", "127.0.0.1", operator.username), job)
    page = browser_page

    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "operator-pass-1")
    page.click("button.primary")
    page.wait_for_url(f"**/jobs/{job.pk}/")

    page.fill("input[name=why]", "2026-11-20T04:00")  # Berlin time: 03:00 UTC
    page.click("form.why button")
    answer = page.inner_text(".why-answer")
    assert answer == ("Skipped: the slot at 2026-11-20 04:00:00 CET (2026-11-20 03:00:00 UTC) was not run: "
                      "job paused by operator (pages) "
                      "at 2026-11-20 02:30:00 UTC.")

    page.goto(f"{live_server.url}/jobs/{job.pk}/slots/?from=2026-11-20T01:00&to=2026-11-20T07:00")
    assert page.locator("tr.slot-ran").count() == 2
    assert page.locator("tr.slot-skipped").count() == 3
    assert page.locator("tr.slot-missing").count() == 1
    shot(page, "slots")

    page.goto(f"{live_server.url}/jobs/{job.pk}/backfill/")
    page.fill("input[name=from]", "2026-11-20T01:00")
    page.fill("input[name=to]", "2026-11-20T07:00")
    page.click("#backfill-preview")
    page.wait_for_selector("#backfill-confirm")
    assert page.inner_text("#backfill-confirm") == "Create 3 runs"
    shot(page, "backfill")
    page.click("#backfill-confirm")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    assert "3 runs queued, 3 slots already had a run" in page.inner_text("body")
    assert JobRun.objects.filter(job=job, trigger=RunTrigger.BACKFILL).count() == 3
