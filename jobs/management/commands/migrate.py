"""``manage.py migrate``: Django's, run again when PostgreSQL ends a migration for a deadlock.

An upgrade migrates while the previous release's processes run (docs/operations/upgrading.md). A
migration takes its tables' locks one statement at a time, the service its rows' in its own order:
now and then PostgreSQL finds the two waiting on each other and ends one, at times the migration
(tests/test_upgrade.py saw it about once in eight upgrades). Each migration is one transaction, so
the one ended left nothing behind, and migrating again goes on from it.
"""

import time

from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import OperationalError

DEADLOCK_DETECTED = "40P01"  # PostgreSQL's SQLSTATE
ATTEMPTS = 5


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " Run again (up to 5 times) when PostgreSQL ends a migration for a deadlock."

    def handle(self, *args, **options):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return super().handle(*args, **options)
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK_DETECTED or attempt == ATTEMPTS:
                    raise
                self.stderr.write(f"A migration was ended by a deadlock with the running service (attempt "
                                  f"{attempt} of {ATTEMPTS}); migrating again.\n{str(exc).splitlines()[0]}")
                time.sleep(attempt)
        return None
