#!/usr/bin/env bash
# Pin every dependency, transitive ones included, with their hashes: requirements.txt and
# requirements-dev.txt name what the project uses (top-level pins); requirements.lock and
# requirements-dev.lock are what scripts/quickstart.sh and scripts/test.sh install, with
# pip's --require-hashes. Run it after changing either .txt file, and commit the locks.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/pip-compile ] || .venv/bin/pip install -q --disable-pip-version-check pip-tools==7.6.2
compile() {
  .venv/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-header \
    --no-emit-index-url --no-emit-find-links --output-file="$2" "$1"
}
compile requirements-dev.txt requirements-dev.lock
# The service's own lock takes the versions the dev lock chose, so the two never disagree.
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
grep -E '^[A-Za-z0-9_.-]+==' requirements-dev.lock | sed 's/ .*//' >"$constraints"
PIP_CONSTRAINT="$constraints" compile requirements.txt requirements.lock
