#!/usr/bin/env bash
# Install what the tests need, start PostgreSQL, Redis and RabbitMQ if they are down, and run the suite
# on PostgreSQL and again on SQLite (the quick start's database) for the tests that start no processes
# and the quick start's whole service, tests/test_sqlite_service.py (see tests/conftest.py;
# TEST_SQLITE=false leaves that pass out). With no arguments the whole suite runs as six passes side by
# side (the chaos tests of the service's faults then the tests/test_[k-z]* half, the other chaos tests
# then the DST ones, the tests that start workers or beat again on RabbitMQ, the tests that start
# processes then the security suite, the others then the DST night, and SQLite then a 3-minute nemesis;
# TEST_SHARDS=false: one after the other, without the nemesis or RabbitMQ). Arguments go to
# pytest in both passes, one after the other
# (scripts/test.sh tests/test_schedules.py -x).
# --quick, for iterating: ruff, import-linter and the tests that start no processes, on PostgreSQL
# only, keeping the test database between runs; once the venv is there it installs nothing, and it
# never audits the dependencies or builds the docs. More arguments go to pytest (--create-db: a new
# test database, after changing a migration).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
if [ "${1:-}" = --quick ]; then quick=true; shift; fi
if [ "$quick" = false ] || [ ! -x .venv/bin/pytest ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # Every dependency, transitive ones too, pinned with its hashes (scripts/lock.sh makes the lock).
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-dev.lock
fi
bash scripts/services.sh
# What only the tests that start processes need (--quick runs none of them).
if [ "$quick" = false ]; then
  # The browser test drives Debian's Chromium (it skips, saying why, when Chromium cannot be had).
  if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "could not install chromium: the browser test will be skipped"
  fi
  # The broker tests start private RabbitMQ nodes (tests/brokers.py); Redis Sentinel is redis-server's.
  if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null) \
      || echo "could not install rabbitmq-server: the RabbitMQ tests will fail"
  fi
  # The clock-skew scenario (tests/chaos/test_hosts.py) shifts workers' clocks with libfaketime.
  if ! command -v faketime >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null) \
      || echo "could not install faketime: the clock-skew test will fail"
  fi
fi
export SECRET_KEY="${SECRET_KEY:-test-only-secret-key}"
# The test client speaks plain http (production defaults to HTTPS-only cookies and redirects).
export HTTPS="${HTTPS:-false}"
# A key for jobs' secret values (tests/security checks none of it reaches a response).
export JOBS_SECRETS_KEYS="${JOBS_SECRETS_KEYS:-rc9yqrHp1zCixaJGqeRSHhYPxhaxSEdjWhg9DqEL-Xw=}"
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/scheduler}"
export REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
# The suite's default broker is that Redis database; tests of other brokers start their own.
unset CELERY_BROKER_URL CELERY_SENTINEL_MASTER_NAME
export JOBS_CALLABLE_MODULES="jobs.builtin,tests.jobfuncs"
export JOBS_HEARTBEAT_SECONDS=1
export PYTHONPATH="$PWD"
mkdir -p staticfiles
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache
# Every migration added from now on must be safe on a running service (django-migration-linter); it asks the
# database only which migrations are applied, so the server's maintenance database does.
DATABASE_URL="${DATABASE_URL%/*}/postgres" .venv/bin/python scripts/lint_migrations.py
if [ "$quick" = true ]; then
  # The SQLite pass's selection (TEST_PROCESSES=none, tests/conftest.py), on PostgreSQL.
  echo "== the tests that start no processes, on PostgreSQL ($DATABASE_URL)"
  # The compiled modules (and pytest's rewritten tests) are kept between runs: 4 CPU-seconds to collect, not 10.
  unset PYTHONDONTWRITEBYTECODE
  TEST_PROCESSES=none TEST_PORT_BASE="${TEST_PORT_BASE:-6390}" exec .venv/bin/python -m pytest --reuse-db "$@"
fi
bash scripts/audit-deps.sh
# The docs site (mkdocs.yml): a broken link or anchor, or a setting the reference lacks, fails it.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

suite_started=$SECONDS
# One pass of pytest: pass NAME DATABASE_URL REDIS_DB PORT_BASE [pytest args]. Each pass has its own
# database, Redis database and ports, so passes can run side by side.
run_pass() {
  local name=$1 database=$2 redis_db=$3 ports=$4; shift 4
  echo "== $name ($database)"
  local started=$SECONDS code=0
  DATABASE_URL="$database" REDIS_URL="${REDIS_URL%/*}/$redis_db" TEST_PORT_BASE="$ports" \
    .venv/bin/python -m pytest "$@" || code=$?
  # Each pass's wall time, to find the longest chain of passes (CI stops at 30 minutes).
  echo "== $name: $((SECONDS - started)) s, from $((started - suite_started)) s to $((SECONDS - suite_started)) s"
  return "$code"
}
postgres="${DATABASE_URL%/*}"
sqlite_dir="$(mktemp -d)"
trap 'rm -rf "$sqlite_dir"' EXIT
sqlite="sqlite:///$sqlite_dir/scheduler.sqlite3"
redis_db="${REDIS_URL##*/}"
status=0
if [ $# -gt 0 ] || [ "${TEST_SHARDS:-true}" = false ]; then
  # The tests asked for, one pass after the other.
  run_pass "the suite on PostgreSQL" "$DATABASE_URL" "$redis_db" 6390 "$@" || status=$?
  if [ "${TEST_SQLITE:-true}" != false ]; then
    # Exit status 5: every test asked for starts processes, so none ran on SQLite.
    run_pass "the tests that start no processes, on SQLite" "$sqlite" "$redis_db" 6390 "$@" || {
      code=$?; [ "$code" = 5 ] || status=$code; }
  fi
  exit "$status"
fi
# The whole suite in six passes side by side (most of the process tests' time is waiting for processes
# and timeouts), each printed when it ends.
logs="$(mktemp -d)"
# The real beat through a compiled DST night waits 5 minutes for its clock.
night=tests/chaos/test_dst_night.py
# The chaos tests in two passes: the service's faults (PostgreSQL and the brokers dying, losing their
# messages; the longest file), then the tests/test_[k-z]* half of the other tests (below); and the rest.
service_faults=tests/chaos/test_service_faults.py
# The tests that start workers, beat or a web server, in a pass of their own: the main pass alone
# took over 20 minutes with them all.
later=(tests/test_limits_workers.py tests/test_parameters_end_to_end.py tests/test_parameters_cli.py
       tests/test_exactly_once.py tests/test_tracing.py tests/test_json_logs.py tests/test_calendars_cli.py
       tests/test_cli_limits.py tests/test_auto_pause.py
       tests/test_end_to_end.py tests/test_policies.py tests/test_workflows_workers.py tests/test_time_limits.py
       tests/test_lost_budget.py tests/test_live_output.py tests/test_cli_tailing.py tests/test_watchdog.py
       tests/test_rabbitmq_only.py tests/test_screenshots.py tests/test_windows_processes.py
       tests/test_windows_cli.py tests/test_task_results.py tests/test_upgrade.py)
# After the other chaos tests: the DST tests that start no processes but compute many nights (3.5 minutes
# alone) and the wheel built and installed in fresh virtualenvs (2 minutes); the security tests after the
# later list: the main pass took 31 minutes with them.
after_chaos=(tests/test_dst_slots.py tests/test_dst_policies.py tests/test_dst_policy_nights.py tests/test_package.py)
# The quick start's whole service on a SQLite file of its own runs in the SQLite pass only (the
# sqlite_service marker, tests/conftest.py).
sqlite_service=tests/test_sqlite_service.py
# The other tests in two halves: tests/test_[k-z]* run after the service's faults.
second=()
for file in tests/test_[k-z]*.py; do
  [[ " ${later[*]} ${after_chaos[*]} $sqlite_service " == *" $file "* ]] || second+=("$file")
done
passes=(faults chaos rabbitmq later main sqlite)
{
  status=0
  run_pass "the chaos tests of the service's faults on PostgreSQL" "$postgres/scheduler_chaos" 14 6600 \
    "$service_faults" || status=$?
  run_pass "the other tests, second half (tests/test_[k-z]*), on PostgreSQL" "$postgres/scheduler_second" 9 8400 \
    "${second[@]}" || status=$?
  exit "$status"
} >"$logs/faults" 2>&1 &
faults=$!
{
  status=0
  run_pass "the other chaos tests on PostgreSQL" "$postgres/scheduler_chaos_b" 8 10000 tests/chaos \
    --ignore="$night" --ignore="$service_faults" || status=$?
  run_pass "the DST tests and the package on PostgreSQL" "$postgres/scheduler_dst" 8 10000 "${after_chaos[@]}" \
    || status=$?
  exit "$status"
} >"$logs/chaos" 2>&1 &
chaos=$!
{
  status=0
  # The tests whose workers and beat speak to the suite's broker, chaos tests among them, again on a
  # RabbitMQ node of their own (tests/brokers.py); those that name their brokers ran on each already
  # (TEST_PROCESSES in tests/conftest.py). Not the DST night (the scheduler's clock, 5 minutes), the
  # nemesis (its own Redis Sentinel and RabbitMQ cluster), nor the upgrade from the previous release
  # (what it proves is the schema's and the processes' roll, not the broker's; 1.5 minutes on the
  # longest chain of passes).
  TEST_BROKER=rabbitmq TEST_PROCESSES=broker run_pass "the tests that start workers or beat, on RabbitMQ" \
    "$postgres/scheduler_rabbitmq" 7 12400 --ignore="$night" --ignore=tests/nemesis --ignore=tests/test_upgrade.py \
    || status=$?
  exit "$status"
} >"$logs/rabbitmq" 2>&1 &
rabbitmq=$!
{
  status=0
  run_pass "the tests that start processes (the later list) on PostgreSQL" "$postgres/scheduler_later" 10 9200 \
    "${later[@]}" || status=$?
  run_pass "the security tests on PostgreSQL" "$postgres/scheduler_security" 10 9200 tests/security || status=$?
  exit "$status"
} >"$logs/later" 2>&1 &
later_pass=$!
# The DST night (5 minutes of the scheduler's clock, mostly waiting) after the other tests: after it,
# the RabbitMQ pass made the longest chain (1,260 of the suite's 1,316 s on 2026-11-30).
{
  status=0
  run_pass "the other tests on PostgreSQL" "$DATABASE_URL" "$redis_db" 6390 --ignore=tests/chaos --ignore=tests/security \
    --ignore="$sqlite_service" "${later[@]/#/--ignore=}" "${second[@]/#/--ignore=}" "${after_chaos[@]/#/--ignore=}" \
    || status=$?
  run_pass "the DST night on PostgreSQL" "$postgres/scheduler_night" 12 7000 "$night" || status=$?
  exit "$status"
} >"$logs/main" 2>&1 &
main=$!
# The nemesis runs after the SQLite pass, the shortest, rather than before the RabbitMQ pass: that
# chain was the longest, 28 of the suite's 30 minutes.
{
  status=0
  if [ "${TEST_SQLITE:-true}" != false ]; then
    run_pass "the tests that start no processes, and the quick start's service, on SQLite" "$sqlite" 13 6800 \
      || status=$?
  fi
  # The nemesis: 3 minutes of random faults on Redis with Sentinel against an outside ledger. It
  # prints its seed; NEMESIS_SEED repeats a run. TEST_NEMESIS=false leaves it out.
  if [ "${TEST_NEMESIS:-true}" = true ]; then
    NEMESIS_SECONDS="${NEMESIS_SECONDS:-180}" run_pass "the nemesis (3 minutes of random faults) on PostgreSQL" \
      "$postgres/scheduler_nemesis" 11 11000 -s tests/nemesis || status=$?
  fi
  exit "$status"
} >"$logs/sqlite" 2>&1 &
sqlite_pass=$!
for pass in "${passes[@]}"; do
  pid_var=$pass
  case $pass in later) pid_var=later_pass ;; sqlite) pid_var=sqlite_pass ;; esac
  wait "${!pid_var}" || status=$?
  cat "$logs/$pass"
done
rm -rf "$logs"
exit "$status"
