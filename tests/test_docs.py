"""The docs site (mkdocs.yml, docs/): it builds strictly, a broken anchor fails it, its settings
reference lists every variable the settings read, the guarantees name test files that exist, and
the README stays a front page."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docs_hooks import settings_reference

from .conftest import REPO

pytestmark = pytest.mark.postgres("the docs site is built without a database: once, on PostgreSQL, is enough")

MKDOCS = Path(sys.executable).with_name("mkdocs")


def build(config, site, cwd=REPO):
    # The notice Material prints about MkDocs 2 is not a warning of the build.
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/tmp", "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=280)


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    if not MKDOCS.exists():
        pytest.fail("mkdocs is not installed: pip install -r requirements-dev.txt")
    site = tmp_path_factory.mktemp("site")
    return build(REPO / "mkdocs.yml", site), site


def test_the_site_builds_strictly(built_site):
    result, site = built_site
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WARNING" not in result.stderr
    for page in ("index.html", "reference/api/index.html", "reference/settings/index.html", "reference/cli/index.html",
                 "tutorial/quickstart/index.html", "BENCHMARKS/index.html"):
        assert (site / page).is_file(), page


def test_the_generated_references_hold_the_code(built_site):
    _result, site = built_site
    api = (site / "reference/api/index.html").read_text()
    for call in ("POST /api/jobs/{id}/backfill/", "GET /api/runs/", "POST /api/jobs-as-code/", "GET /api/jobs/{id}/why/"):
        assert call in api, call
    cli = (site / "reference/cli/index.html").read_text()
    for command in ("jobsctl backfill", "jobsctl workflows rerun", "manage.py jobs apply", "manage.py secrets rotate"):
        assert command in cli, command
    settings_page = (site / "reference/settings/index.html").read_text()
    assert "JOBS_HEARTBEAT_SECONDS" in settings_page


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    with (docs / "tutorial" / "first-job.md").open("a") as page:
        page.write("\nSee [the kinds](../guide/jobs.md#no-such-anchor) and [a page](../guide/no-such-page.md).\n")
    config = (REPO / "mkdocs.yml").read_text()
    config = config.replace("docs_dir: docs\n", f"docs_dir: {docs}\n")
    config = config.replace("  - docs_hooks/reference.py\n", f"  - {REPO}/docs_hooks/reference.py\n")
    config = re.sub(r"(?m)^watch:\n(  - .*\n)+", "", config)
    (tmp_path / "mkdocs.yml").write_text(config)

    result = build(tmp_path / "mkdocs.yml", tmp_path / "site", cwd=tmp_path)

    assert result.returncode != 0
    assert "does not contain an anchor '#no-such-anchor'" in result.stderr
    assert "'guide/no-such-page.md' is not found" in result.stderr
    assert result.stderr.count("WARNING") == 2  # nothing else is wrong with the copy


def variables_read_by_the_settings():
    """Every environment variable named as a string in a read of ``scheduler_site/``: the typed readers
    of env.py and os.environ, found by a pattern of this test's own (not the generator's parser)."""
    reads = re.compile(r"""\b(?:env_\w+\(|os\.environ\.get\(|os\.environ\[|os\.getenv\()\s*["']([A-Z][A-Z0-9_]*)["']""")
    return {name for path in (REPO / "scheduler_site").glob("*.py") for name in reads.findall(path.read_text())}


def test_the_settings_reference_lists_every_variable_the_settings_read():
    read = variables_read_by_the_settings()
    assert {"DATABASE_URL", "JOBS_HEARTBEAT_SECONDS", "FLOWER_BASIC_AUTH", "CELERY_BROKER_URL"} <= read
    page = settings_reference.markdown()
    rows = set(re.findall(r"(?m)^\| `([A-Z][A-Z0-9_]*)` \|", page))
    assert read - rows == set()
    # REDIS_URL is read through a variable (the broker's name), which the pattern above cannot see.
    assert "REDIS_URL" in rows
    assert settings_reference.problems() == []
    for row in page.splitlines():
        if row.startswith("| `"):
            meaning = row.rstrip(" |").rsplit(" | ", 1)[1]
            assert meaning.strip() not in ("", "See ."), row


def test_a_variable_without_a_meaning_is_a_problem_unless_a_guide_describes_it(tmp_path, monkeypatch):
    meanings = settings_reference.meanings()
    del meanings["JOBS_TICK_SECONDS"]
    meanings["JOBS_NOTHING_READS_THIS"] = "a setting of the past"
    (tmp_path / "settings.yml").write_text(yaml.safe_dump(meanings))
    guides = tmp_path / "guide"
    guides.mkdir()
    monkeypatch.setattr(settings_reference, "MEANINGS", tmp_path / "settings.yml")
    monkeypatch.setattr(settings_reference, "GUIDES", guides)

    assert settings_reference.problems() == [
        "JOBS_TICK_SECONDS is read by the settings but has no meaning in docs/reference/settings.yml nor a guide page",
        "docs/reference/settings.yml describes JOBS_NOTHING_READS_THIS, which no setting reads",
    ]

    # A guide page of its own (another engineer's new setting) is enough: the reference links to it.
    (guides / "ticks.md").write_text("# Ticks\n\n`JOBS_TICK_SECONDS` (1 s) is how often the scheduler looks.\n")
    assert settings_reference.problems() == [
        "docs/reference/settings.yml describes JOBS_NOTHING_READS_THIS, which no setting reads"]
    assert "| `JOBS_TICK_SECONDS` | number, at least `0.05` | `1` | See [Ticks](../guide/ticks.md). |" in (
        settings_reference.markdown())


def test_each_test_the_guarantees_name_exists():
    text = (REPO / "docs" / "reference" / "guarantees.md").read_text()
    named = re.findall(r"`(tests/[\w/*.]+?)(?:::(\w+))?`", text)
    assert len(named) >= 8
    for path, function in named:
        files = sorted(REPO.glob(path)) if "*" in path else [REPO / path]
        assert files and all(f.exists() for f in files), path
        if function:
            assert re.search(rf"(?m)^(async )?def {function}\(", files[0].read_text()), f"{path}::{function}"


def test_the_readme_is_a_front_page_whose_links_lead_somewhere():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "scripts/quickstart.sh" in readme and "scripts/test.sh" in readme and "mkdocs serve" in readme
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", readme):
        assert (REPO / target).exists(), target
