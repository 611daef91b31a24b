"""A new user's first ten minutes, in Chromium against a live server and a real worker: log in, make a
job with a parameter, run it with a value and watch the run end live, make a limit and a calendar, read
the job's report and the forecast. Then someone of another team walks the same addresses and is
refused every one of the first user's objects. Each step asserts what the page shows."""

from django.contrib.auth.models import Group, User

from jobs.models import Calendar, Job, JobRun, Limit

from .test_browser import browser_page  # noqa: F401  (the fixture, which needs Chromium)

PASSWORD = "walk-pass-1"


def log_in(page, base, username):
    page.goto(f"{base}/")
    assert "/accounts/login/" in page.url and "Jobs" not in page.inner_text("body")  # no menu logged out
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button.primary")
    page.wait_for_url(f"{base}/")


def declare_parameter(page, name, kind, default):
    row = page.locator("[data-rows=parameters] .row").first
    row.locator("input[name=parameters-name]").fill(name)
    row.locator("select[name=parameters-type]").select_option(kind)
    row.locator("input[name=parameters-default]").fill(default)


def test_a_new_user_walks_through_the_pages_and_another_team_reaches_none_of_it(
        processes, live_server, browser_page):  # noqa: F811
    alice = User.objects.create_user("alice", password=PASSWORD)
    alice.groups.add(Group.objects.create(name="analytics"))
    bob = User.objects.create_user("bob", password=PASSWORD)
    bob.groups.add(Group.objects.create(name="finance"))
    processes.worker()
    page, base = browser_page, live_server.url

    log_in(page, base, "alice")
    assert "Overview" in page.inner_text("h1")

    # A job with a parameter, from the form.
    page.goto(f"{base}/jobs/new/")
    page.fill("input[name=name]", "alice-greeting")
    page.select_option("select[name=kind]", "callable")
    page.fill("input[name=target]", "builtin.echo")
    declare_parameter(page, "who", "string", "world")
    page.select_option("select[name=schedule_type]", "cron")
    page.fill("input[name=timezone]", "Europe/Paris")
    page.fill("input[name=cron]", "0 6 * * *")
    page.click("#save-job")
    job = Job.objects.get(name="alice-greeting")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    assert "alice-greeting is created." in page.inner_text(".messages")
    assert "(0 6 * * *, Europe/Paris)" in page.inner_text("body")
    assert job.parameters[0] | {"name": "who", "type": "string", "default": "world"} == job.parameters[0]

    # Run it now with a value, and watch the run end without reloading.
    page.click("#run-now")
    page.wait_for_url(f"**/jobs/{job.pk}/run/")
    page.fill("input[name=param-who]", "Alice")
    page.click("button.primary")
    page.wait_for_url("**/runs/*/")
    page.evaluate("window.notReloaded = true")
    page.wait_for_selector("#run-status .s-succeeded", timeout=60_000)
    assert page.evaluate("window.notReloaded") is True
    run = JobRun.objects.get(job=job)
    assert run.params == {"who": "Alice"}
    assert "Alice" in page.inner_text("body")

    # A limit and a calendar, each from its form.
    page.goto(f"{base}/limits/new/")
    page.fill("input[name=key]", "alice-loads")
    page.fill("input[name=max_running]", "2")
    page.click("#save-limit")
    page.wait_for_url(f"{base}/limits/**")
    assert "alice-loads" in page.inner_text("body")
    assert Limit.objects.get(key="alice-loads").owner == alice

    page.goto(f"{base}/calendars/")
    page.fill("#new-calendar input[name=name]", "alice-closed")
    page.fill("#new-calendar textarea[name=dates]", "2026-12-24\n2026-12-25")
    page.click("#save-calendar")
    page.wait_for_url(f"{base}/calendars/alice-closed/")
    shown = page.inner_text("body")
    assert "2026-12-24" in shown and "2026-12-25" in shown
    assert Calendar.objects.get(name="alice-closed").owner == alice

    # The job's report leaves the run now out of its slots; the reports' index and the forecast answer.
    page.goto(f"{base}/jobs/{job.pk}/report/")
    report = page.inner_text("body")
    assert "alice-greeting: on-time report" in report
    # The run now is no scheduled slot's: left out of the slots, said so on the page.
    assert "SLOTS WITH A RUN\t0" in report and "Manual runs and backfills are not counted in the slots" in report
    page.goto(f"{base}/reports/")
    assert "alice-greeting" in page.inner_text("body")
    page.goto(f"{base}/forecast/")
    assert "forecast" in page.inner_text("h1").lower()
    assert "Europe/Paris" in page.inner_text("body") or "alice-greeting" in page.inner_text("body")

    # Someone of another team: every one of alice's objects is a 404, and no list shows them.
    page.click("button:has-text('Log out')")
    log_in(page, base, "bob")
    for address in (f"/jobs/{job.pk}/", f"/jobs/{job.pk}/edit/", f"/jobs/{job.pk}/run/", f"/jobs/{job.pk}/report/",
                    f"/runs/{run.pk}/", "/limits/alice-loads/edit/", "/calendars/alice-closed/"):
        assert page.goto(f"{base}{address}").status == 404, address
    for address in ("/jobs/", "/runs/", "/limits/", "/calendars/", "/reports/", "/workers/", "/"):
        assert page.goto(f"{base}{address}").status == 200, address
        shown = page.inner_text("body")
        assert "alice-greeting" not in shown and "alice-loads" not in shown and "alice-closed" not in shown, address
