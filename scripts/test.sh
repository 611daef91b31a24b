#!/usr/bin/env bash
# Install what the tests need, start PostgreSQL and Redis if they are down, and run the suite.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/test_schedules.py -x).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
bash scripts/services.sh
# The browser test drives Debian's Chromium (it skips, saying why, when Chromium cannot be had).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "could not install chromium: the browser test will be skipped"
fi
export SECRET_KEY="${SECRET_KEY:-test-only-secret-key}"
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/scheduler}"
export REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
export JOBS_CALLABLE_MODULES="jobs.builtin,tests.jobfuncs"
export JOBS_HEARTBEAT_SECONDS=1
export PYTHONPATH="$PWD"
mkdir -p staticfiles
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
