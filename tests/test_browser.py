"""The pages in a real browser (Debian's Chromium driven by Playwright) against a live server and a
real worker: log in, run a job from its page and watch its run finish without reloading, see a
failing job on the overview. Screenshots go to the test's temporary folder (the README's and the docs'
pictures are scripts/screenshots.py's)."""

import importlib.util
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connections

from jobs import lifecycle
from jobs.actions.permissions import COMMAND_RUNNERS_GROUP
from jobs.definitions.jobs import save_job
from jobs.models import Job, JobRun

from .conftest import require, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

@pytest.fixture
def browser_page(monkeypatch):
    require(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    require(importlib.util.find_spec("playwright") is not None,
            "the playwright Python package is not installed (pip install playwright)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test are still
    # synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()
            # Inside Playwright's context the ORM had a connection of its own (Playwright switches
            # greenlets, and Django's connections are per context): close it, or it blocks
            # dropping the test database.
            connections.close_all()


@pytest.fixture
def shot(tmp_path):
    """``shot(page, name)`` saves a screenshot of the whole page; returns its path."""
    folder = tmp_path

    def take(page, name):
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def test_it_runs_a_job_from_its_page_and_shows_the_run_finish_live(processes, live_server, browser_page, shot):
    operator = User.objects.create_user("operator", password="operator-pass-1", is_staff=True)
    operator.groups.add(Group.objects.get(name=COMMAND_RUNNERS_GROUP))  # the job below is a command
    job = save_job(Job(name="say-hello", kind="command", target="echo hello from the browser; sleep 2; echo bye",
                       sla_seconds=5), {"type": "cron", "cron": "*/15 * * * *", "timezone": "Europe/Berlin"})
    broken = save_job(Job(name="broken-export", kind="callable", target="builtin.fail"), {"type": "manual"})
    processes.worker()
    failed_run = lifecycle.create_run(broken)
    page = browser_page

    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "operator-pass-1")
    page.click("button.primary")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    assert "Next 10 runs (Europe/Berlin)" in page.inner_text("body")

    page.click("#run-now")
    page.wait_for_url("**/runs/*/")
    page.evaluate("window.notReloaded = true")
    page.wait_for_selector("#run-status .s-succeeded", timeout=40_000)
    assert page.evaluate("window.notReloaded") is True
    assert "hello from the browser\nbye" in page.inner_text("#output")
    assert "Attempt 1" in page.inner_text("body")
    run_png = shot(page, "run")

    wait_for(lambda: JobRun.objects.get(pk=failed_run.pk).is_terminal, timeout=30,
             message="the failing run to finish")
    lifecycle.fold_ends()  # what the scheduler leader does every tick (no beat runs here)
    page.goto(f"{live_server.url}/")
    failures = page.locator("section.card", has_text="Recent failures")
    assert "broken-export" in failures.inner_text()
    assert "failing on purpose" in failures.inner_text()
    assert page.inner_text(".count.s-succeeded strong") == "1" and page.inner_text(".count.s-failed strong") == "1"
    shot(page, "overview")
    page.goto(f"{live_server.url}/jobs/")
    shot(page, "jobs")
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    shot(page, "job")
    assert run_png.stat().st_size > 0
