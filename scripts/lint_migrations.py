"""Check that every migration of the project's apps added from now on is safe on a running service,
with django-migration-linter (a dev dependency; scripts/test.sh runs this, so CI fails on an unsafe
one): no column dropped or renamed, none added NOT NULL without a database default, no table
rewritten, no index built under the table's lock... Exits 1 naming each migration it refuses.

The migrations shipped before the linter came are exempt by name (``SHIPPED``); never add to it: a
migration the linter refuses is written again (expand, then contract; ``AddIndexConcurrently``; a
``db_default``), or, when a person has checked it is safe, says so itself with the linter's
``IgnoreMigration()`` operation and a comment saying why.

It reads the migrations' SQL as the project's database (PostgreSQL) would run it, and asks the
database only which migrations are applied: run it with the test settings (DATABASE_URL) of
scripts/test.sh."""

import os
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
APPS = ("jobs", "notifications", "workflows", "audit", "sso")
SHIPPED = (
    "0001_squashed_0030_bundle", "0031_team_ownership",  # jobs
    "0001_squashed_0007_paused_event", "0008_team_ownership",  # notifications
    "0001_squashed_0002_step_params",  # workflows
    "0001_squashed_0003_system_source_limit_and_calendar_subjects", "0004_hash_chain_and_people",  # audit
    "0001_identities",  # sso
)


def main():
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_site.settings")
    django.setup()
    try:
        from django_migration_linter import MigrationLinter
    except ImportError:  # a venv made before the linter came, kept by scripts/test.sh --quick
        print("lint_migrations: django-migration-linter is not installed: .venv/bin/pip install --require-hashes "
              "-r requirements-dev.lock (or run scripts/test.sh once without --quick)", file=sys.stderr)
        return 2

    linter = MigrationLinter(str(ROOT), include_apps=APPS, ignore_name=SHIPPED, no_cache=True,
                             all_warnings_as_errors=True, quiet=["ignore"])
    linter.lint_all_migrations()
    return 1 if linter.has_errors else 0


if __name__ == "__main__":
    sys.exit(main())
