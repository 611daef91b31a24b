"""Takes the README's and the docs' screenshots from the pages as they are now: the quick start in a copy
of the checkout (its own SQLite database and Redis; web, worker, beat and Flower on spare ports), a few
jobs, runs, a limit, a calendar and a workflow made through the API, then each page in Debian's Chromium
(Playwright). A page that does not answer 200, or shows a server error, fails it, and CI runs it
(tests/test_screenshots.py), so a page that breaks fails there.

    .venv/bin/python scripts/screenshots.py                  # into docs/screenshots/
    .venv/bin/python scripts/screenshots.py --out /tmp/shots --port 18400
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.quickstart_service import REPO, QuickStartService

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
START_SECONDS = 300  # migrations on a new SQLite database, on a busy CI machine
RUNS_SECONDS = 180


def made_up(service):
    """A small service's worth of things to look at; answers the ids the pages' addresses need."""

    def api(method, path, **body):
        return service.api(method, path.removeprefix("/api/"), json=body or None)

    api("POST", "/api/limits/", key="warehouse", max_running=2, description="The warehouse takes two loads at once.")
    api("POST", "/api/calendars/", name="company-holidays", description="Days the office is closed.",
        dates=["2026-12-24", "2026-12-25", "2026-12-31"])
    report = api("POST", "/api/jobs/", name="nightly-report", kind="callable", target="builtin.sleep",
                 kwargs={"seconds": 2}, sla_seconds=60, limit="warehouse", tags=["reports"],
                 schedule={"type": "cron", "cron": "0 2 * * *", "timezone": "Europe/Paris"})
    hello = api("POST", "/api/jobs/", name="hello", kind="callable", target="builtin.echo", args=["hello"],
                schedule={"type": "interval", "every_seconds": 60})
    failing = api("POST", "/api/jobs/", name="flaky-export", kind="callable", target="builtin.fail",
                  kwargs={"message": "the export host refused the connection"}, tags=["exports"],
                  schedule={"type": "cron", "cron": "*/30 * * * *", "timezone": "UTC"})
    steps = [api("POST", "/api/jobs/", name=name, kind="callable", target="builtin.sleep", kwargs={"seconds": 1},
                 schedule={"type": "manual"})["name"] for name in ("extract", "transform", "load")]
    workflow = api("POST", "/api/workflows/", name="nightly-etl", nodes=steps,
                   schedule={"type": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
                   edges=[{"from": "extract", "to": "transform"}, {"from": "transform", "to": "load"}])
    api("POST", "/api/windows/", name="db-upgrade", mode="hold", cron="0 3 * * 0", duration_seconds=3600,
        timezone="Europe/Paris", tags=["reports"], description="The warehouse database is upgraded on Sundays.")
    for job in (report, hello, failing, report):
        api("POST", f"/api/jobs/{job['id']}/run/")
    api("POST", f"/api/workflows/{workflow['id']}/run/")
    return {"report": report["id"], "workflow": workflow["id"]}


def all_runs_ended(service):
    runs = service.api("GET", "runs/?page_size=100")["results"]
    return runs and all(run["status"] not in ("pending", "queued", "running", "retrying") for run in runs) and runs


def pages(ids, run_id):
    """(file name, address) of each screenshot."""
    job = ids["report"]
    return [("overview", "/"), ("jobs", "/jobs/"), ("job", f"/jobs/{job}/"), ("run", f"/runs/{run_id}/"),
            ("job_form", "/jobs/new/"), ("slots", f"/jobs/{job}/slots/"), ("backfill", f"/jobs/{job}/backfill/"),
            ("report", f"/jobs/{job}/report/"), ("forecast", "/forecast/"), ("limits", "/limits/"),
            ("calendars", "/calendars/"), ("calendar", "/calendars/company-holidays/"),
            ("workflow", f"/workflows/{ids['workflow']}/"), ("workers", "/workers/"), ("windows", "/windows/"),
            # The forms, one per resource, with the one form kit.
            ("limit_form", "/limits/new/"), ("window_form", "/windows/new/"), ("channel_form", "/channels/new/"),
            ("rule_form", "/rules/new/"), ("workflow_form", "/workflows/new/")]


def shoot(service, user, password, shots, out):
    from playwright.sync_api import sync_playwright

    base = service.url

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/accounts/login/")
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", password)
            page.click("button:has-text('Log in')")
            page.wait_for_load_state()
            if "/accounts/login/" in page.url:
                raise SystemExit(f"could not log in as {user}: {page.inner_text('main')[:300]}")
            # Beat takes the leader's lease within a tick or two of starting.
            service.wait(lambda: page.goto(base + "/") and "No scheduler is leading" not in page.inner_text("body"),
                         60, "a scheduler to lead")
            for name, address in shots:
                response = page.goto(base + address)
                text = page.inner_text("body")
                if response.status != 200 or "Server Error" in text:
                    raise SystemExit(f"{address} answered {response.status}: {text[:300]}")
                page.screenshot(path=str(out / f"{name}.png"), full_page=True)
                print(f"{out / name}.png  {address}")
        finally:
            browser.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--port", type=int, default=18400, help="web; Flower and Redis on the next two")
    options = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        service = QuickStartService(folder, options.port)
        try:
            service.start(START_SECONDS)
            ids = made_up(service)
            runs = service.wait(lambda: all_runs_ended(service), RUNS_SECONDS, "the runs to end")
            succeeded = [run["id"] for run in runs if run["job"] == ids["report"] and run["status"] == "succeeded"]
            shoot(service, "admin", service.admin_password(),
                  pages(ids, succeeded[0] if succeeded else runs[0]["id"]), options.out)
        except BaseException:
            print(service.log(), file=sys.stderr)
            raise
        finally:
            service.stop()


if __name__ == "__main__":
    main()
