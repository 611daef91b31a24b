"""A job's versions: each saved change of a job is the next one (``JobVersion``), its number kept on
the job (``Job.version``) for the runs made from it to copy (``jobs.lifecycle.runs.create_runs``).

The actions that save a job record its version here, in the transaction of the change, with the
job's snapshot and the diff its audit entry records (``jobs.actions.snapshot``). A new job is saved
at version 1 already, and its version keeps no diff (what it changed is all of its values, which the
API and the pages show as its changes); a changed one is moved to its next number here.

A workflow's versions are recorded here too (``workflows.actions``): whatever has a ``version``
number and ``versions`` (a ``jobs.models.Version`` keyed to it) is versioned alike."""

from django.db import connection
from django.db.models import F
from django.utils import timezone

from .. import kinds
from .jobs import copy_rows

# Past this many versions at once (jobs apply), they are written by COPY.
COPY_FROM = 200


def kept(snapshot):
    """What a version keeps of a snapshot: everything but the values of a job's secret fields."""
    values = {**snapshot}
    for name in kinds.secret_fields():
        values.pop(name, None)
    return values


def record(versioned, snapshot, changes, user=None, author_name="", detail="", created=False):
    record_many([(versioned, snapshot, changes)], user, author_name, detail, created)


def record_many(saved, user=None, author_name="", detail="", created=False):
    """The next version of each job (or workflow) of ``saved`` ([(it, its snapshot, the changes)]),
    as saved. ``created``: new ones, inserted at version 1 already (their diff is all their values,
    not kept); else changed ones, each at the version it had (the caller keeps ``version`` as the
    locked row has it), moved to their next number here and on their rows."""
    if not saved:
        return
    model = type(saved[0][0])
    relation = model._meta.get_field("versions")
    version_model, key = relation.related_model, relation.field.attname
    fields = [f.attname for f in version_model._meta.concrete_fields if not f.primary_key]
    now, rows = timezone.now(), []
    common = {"created_at": now, "author_id": user.pk if user is not None else None,
              "author_name": author_name[:255], "detail": detail[:255]}
    for versioned, snapshot, changes in saved:
        if not created:
            versioned.version += 1
        rows.append({**common, key: versioned.pk, "number": versioned.version, "values": kept(snapshot),
                     "changes": {} if created else changes})
    if connection.vendor == "postgresql" and len(rows) >= COPY_FROM:
        # As plain rows: making 100,000 versions models was a twentieth of applying a file.
        copy_rows(version_model, [version_model._meta.get_field(name) for name in fields],
                  ([row[name] for name in fields] for row in rows))
    else:
        version_model.objects.bulk_create([version_model(**row) for row in rows], batch_size=2000)
    if not created:
        ids = [versioned.pk for versioned, _, _ in saved]
        for start in range(0, len(ids), 10000):
            model.objects.filter(pk__in=ids[start:start + 10000]).update(version=F("version") + 1)
