"""The job forms in a real browser, as a user who is not staff: create a job (only the chosen kind's
and schedule's fields shown, arguments as rows, the schedule in words and its next slots as it is
typed), edit it, and run it on a real worker. Screenshots as in test_browser
(in the test's temporary folder)."""

from django.contrib.auth.models import User

from jobs.models import Job, JobRun

from .test_browser import browser_page, shot  # noqa: F401  (the fixtures, which need Chromium)


def test_a_user_who_is_not_staff_creates_edits_and_runs_a_job(processes, live_server, browser_page, shot):  # noqa: F811
    User.objects.create_user("alice", password="alice-pass-1")
    processes.worker()
    page = browser_page

    page.goto(f"{live_server.url}/jobs/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice-pass-1")
    page.click("button.primary")
    page.wait_for_url("**/jobs/")
    page.click("#new-job")
    page.wait_for_url("**/jobs/new/")

    # Only the fields of the chosen kind and schedule type are shown.
    assert page.is_visible("#field-kwargs") and not page.is_visible("#field-environment")
    assert not page.is_visible("#field-http_headers") and not page.is_visible("#field-cron")
    page.select_option("select[name=kind]", "http")
    assert page.is_visible("#field-http_headers") and not page.is_visible("#field-kwargs")
    page.select_option("select[name=kind]", "callable")

    page.fill("input[name=name]", "greeting")
    page.fill("input[name=target]", "builtin.echo")
    page.fill("[data-rows=args] input[name=args-value]", "42")
    page.fill("[data-rows=kwargs] input[name=kwargs-key]", "who")
    page.fill("[data-rows=kwargs] input[name=kwargs-value]", "world")
    page.click("[data-add-row=kwargs]")
    assert page.locator("[data-rows=kwargs] .row").count() == 2
    page.locator("[data-rows=kwargs] input[name=kwargs-key]").nth(1).fill("loud")
    page.locator("[data-rows=kwargs] input[name=kwargs-value]").nth(1).fill("true")

    # The schedule in words and its next 10 slots, as it is typed; a mistake is named at once.
    page.select_option("select[name=schedule_type]", "cron")
    assert page.is_visible("#field-cron") and not page.is_visible("#field-every_seconds")
    page.fill("input[name=timezone]", "Europe/Berlin")
    page.fill("input[name=cron]", "*/10 * *")
    page.wait_for_selector("#schedule-error")
    assert "A cron expression has 5 fields" in page.inner_text("#schedule-preview")
    page.fill("input[name=cron]", "*/10 * * * *")
    page.wait_for_selector("#schedule-words:has-text('Every 10 minutes')")
    assert page.locator("#schedule-slots li").count() == 10
    assert "Next 10 runs (Europe/Berlin)" in page.inner_text("#schedule-preview")
    shot(page, "job_form")
    page.click("#save-job")

    job = Job.objects.get(name="greeting")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    assert "greeting is created." in page.inner_text(".messages")
    assert job.args == [42] and job.kwargs == {"who": "world", "loud": True} and job.owner.username == "alice"
    assert "Every 10 minutes (*/10 * * * *, Europe/Berlin)" in page.inner_text("body")

    # Edit: a mistake is shown next to its field, the rest kept as typed; then saved.
    page.click("#edit-job")
    page.wait_for_url(f"**/jobs/{job.pk}/edit/")
    page.locator("[data-rows=kwargs] input[name=kwargs-value]").first.fill("Alice")
    page.fill("input[name=timeout_seconds]", "0")
    page.click("#save-job")
    page.wait_for_selector("#field-timeout_seconds .field-error")
    assert "Ensure this value is greater than or equal to 1." in page.inner_text("#field-timeout_seconds")
    assert page.locator("[data-rows=kwargs] input[name=kwargs-value]").first.input_value() == "Alice"
    page.fill("input[name=timeout_seconds]", "120")
    page.click("#save-job")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    job.refresh_from_db()
    assert job.kwargs == {"who": "Alice", "loud": True} and job.timeout_seconds == 120

    page.click("#run-now")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector("#run-status .s-succeeded", timeout=40_000)
    run = JobRun.objects.get(job=job)
    assert run.result == {"args": [42], "kwargs": {"who": "Alice", "loud": True}}
