"""A test whose prerequisite (Chromium, root, the PostgreSQL binaries) is missing skips on a
developer's machine and fails under CI=true."""

import pytest

from .conftest import require


def test_a_missing_prerequisite_fails_the_test_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="prerequisite missing .*: no Chromium"):
        require(False, "no Chromium")


def test_a_missing_prerequisite_skips_the_test_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Chromium"):
        require(False, "no Chromium")


def test_a_present_prerequisite_lets_the_test_run(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert require(True, "anything") is None
