"""scripts/screenshots.py as CI runs it: the quick start in a copy of the checkout, a few jobs, runs, a
limit, a calendar and a workflow, every page answering 200 in Chromium, and a screenshot of each page
the README and the docs show (a picture no page makes any more fails here)."""

import os
import re
import subprocess
import sys

import pytest

from .conftest import REPO, require

SHOWN = re.compile(r"screenshots/(\w+)\.png")


def screenshots_shown():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return {name for page in pages for name in SHOWN.findall(page.read_text())}


@pytest.mark.postgres("runs the quick start's own SQLite database, not the test database: once is enough")
@pytest.mark.timeout(900)
def test_the_script_takes_every_screenshot_the_docs_show_from_live_pages(tmp_path):
    require(os.path.exists("/usr/bin/chromium"), "no Chromium at /usr/bin/chromium (apt-get install chromium)")
    port = int(os.environ.get("TEST_PORT_BASE", "6390")) + 420  # clear of tests/chaos/servers' 200
    result = subprocess.run([sys.executable, "scripts/screenshots.py", "--out", str(tmp_path), "--port", str(port)],
                            cwd=REPO, capture_output=True, text=True, timeout=840)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    made = {path.stem for path in tmp_path.glob("*.png") if path.stat().st_size > 5000}
    assert screenshots_shown() <= made, f"shown but not made: {screenshots_shown() - made}"
    assert {"overview", "job", "run", "forecast", "limits", "calendar", "workflow", "workers"} <= made
