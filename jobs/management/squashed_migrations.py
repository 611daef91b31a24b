"""The migrations of the previous release, d8a114e, are squashed, one per app (jobs.0001_squashed_0030_bundle
and the others'), and the files they replace are gone; this release's own migrations follow the squashes.
A database with all of a squash's migrations applied takes it as applied; one with only some of them
cannot be migrated from here (Django would find no migration of that app and fail on another's), so
``migrate`` stops first and says which release to migrate with."""

from django.core import checks
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

PREVIOUS_RELEASE = "d8a114e"


def partly_applied(databases=None, **kwargs):
    """A database check (``migrate`` runs it): an error per squash of which some but not all the
    replaced migrations are applied."""
    errors = []
    squashes = [m for m in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.values() if m.replaces]
    for alias in databases or ():
        recorder = MigrationRecorder(connections[alias])
        if not recorder.has_table():
            continue
        applied = set(recorder.applied_migrations())
        for squash in squashes:
            done = applied.intersection(squash.replaces)
            if done and len(done) < len(squash.replaces) and (squash.app_label, squash.name) not in applied:
                errors.append(checks.Error(
                    f"The database {alias!r} has the {squash.app_label} migrations applied up to {max(done)[1]} only: "
                    f"this release replaces them, up to {max(squash.replaces)[1]}, by {squash.name} and no longer "
                    "has their files.",
                    hint=f"Migrate with {PREVIOUS_RELEASE}, the previous release, first (it has them), then with "
                         "this one (docs/operations/deployment.md, Upgrading).",
                    id="jobs.E001"))
    return errors
