#!/usr/bin/env bash
# pip-audit over the locked dependencies (requirements-dev.lock holds the service's and the tests'):
# a known vulnerability fails. pip-audit asks PyPI's JSON API for each pinned version; where the
# machine cannot reach it (a registry mirror without the per-version API), every dependency comes back
# unaudited: that is said loudly, and fails only with AUDIT_DEPS_STRICT=true.
set -euo pipefail
cd "$(dirname "$0")/.."
# A run that writes no report at all (seen once: PyPI's API failing mid-run) is tried twice more.
report="$(mktemp)"
errors="$(mktemp)"
trap 'rm -f "$report" "$errors"' EXIT
for attempt in 1 2 3; do
  status=0
  .venv/bin/pip-audit --requirement requirements-dev.lock --require-hashes --disable-pip --progress-spinner off \
    --format json --output "$report" >/dev/null 2>"$errors" || status=$?
  [ -s "$report" ] && break
  sleep 5
done
.venv/bin/python - "$report" "$status" "${AUDIT_DEPS_STRICT:-false}" "$errors" <<'PY'
import json, sys

path, status, strict, errors = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "true", sys.argv[4]
try:
    with open(path) as f:
        deps = json.load(f)["dependencies"]
except (OSError, ValueError, KeyError):
    with open(errors, errors="replace") as f:
        said = [line for line in f.read().splitlines() if line.strip() and "WARNING: Location" not in line][-3:]
    print(f"pip-audit: no report after 3 tries (exit {status}): nothing audited", *said, sep="\n  ")
    sys.exit(1 if strict else 0)
vulnerable = [d for d in deps if d.get("vulns")]
skipped = [d for d in deps if "skip_reason" in d]
for d in vulnerable:
    for v in d["vulns"]:
        print(f"pip-audit: {d['name']} {d['version']}: {v['id']} (fixed in {', '.join(v.get('fix_versions') or ['?'])})")
print(f"pip-audit: {len(deps) - len(skipped)} of {len(deps)} locked dependencies audited, "
      f"{len(vulnerable)} with known vulnerabilities")
if skipped:
    print(f"pip-audit: {len(skipped)} could not be audited (first: {skipped[0]['skip_reason']}): "
          "no vulnerability database reachable from this machine")
sys.exit(1 if vulnerable or (strict and skipped) else 0)
PY
