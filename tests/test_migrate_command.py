"""``manage.py migrate`` runs again a migration PostgreSQL ended for a deadlock with the running service
(jobs/management/commands/migrate.py; the deadlocks themselves come in tests/test_upgrade.py), and
only that."""

from io import StringIO

import psycopg.errors
import pytest
from django.core.management import call_command
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import OperationalError

from jobs.management.commands import migrate


def failing(times, error):
    """Django's migrate, which fails ``times`` times with ``error`` (a psycopg error), then succeeds."""
    calls = []

    def handle(self, *args, **options):
        calls.append(options)
        if len(calls) <= times:
            raise OperationalError(str(error)) from error

    return handle, calls


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(migrate.time, "sleep", lambda seconds: None)


def test_a_migration_ended_by_a_deadlock_is_run_again(monkeypatch):
    handle, calls = failing(2, psycopg.errors.DeadlockDetected("deadlock detected"))
    monkeypatch.setattr(DjangoMigrate, "handle", handle)
    err = StringIO()

    call_command("migrate", verbosity=0, stderr=err)

    assert len(calls) == 3
    assert err.getvalue().count("ended by a deadlock with the running service") == 2


def test_it_gives_up_after_five_deadlocks(monkeypatch):
    handle, calls = failing(5, psycopg.errors.DeadlockDetected("deadlock detected"))
    monkeypatch.setattr(DjangoMigrate, "handle", handle)

    with pytest.raises(OperationalError, match="deadlock detected"):
        call_command("migrate", verbosity=0, stderr=StringIO())
    assert len(calls) == 5


def test_another_database_error_is_not_retried(monkeypatch):
    handle, calls = failing(1, psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"))
    monkeypatch.setattr(DjangoMigrate, "handle", handle)

    with pytest.raises(OperationalError, match="lock timeout"):
        call_command("migrate", verbosity=0, stderr=StringIO())
    assert len(calls) == 1
