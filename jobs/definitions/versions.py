"""A job's versions: each saved change of a job is the next one (``JobVersion``), its number kept on
the job (``Job.version``) for the runs made from it to copy (``jobs.lifecycle.runs.create_runs``).

The actions that save a job record its version here, in the transaction of the change, with the
job's snapshot and the diff its audit entry records (``jobs.actions.snapshot``)."""

from django.db.models import F

from .. import kinds
from ..models import Job, JobVersion


def kept(snapshot):
    """What a version keeps of a job's snapshot: everything but the values of its secret fields."""
    secret = kinds.secret_fields()
    return {name: value for name, value in snapshot.items() if name not in secret}


def record(job, snapshot, changes, user=None, author_name="", detail=""):
    record_many([(job, snapshot, changes)], user, author_name, detail)


def record_many(saved, user=None, author_name="", detail=""):
    """The next version of each job of ``saved`` ([(job, its snapshot, the changes)]), each job as
    saved, at the version it had (``job.version``: the caller keeps it as the locked row has it)."""
    rows = []
    for job, snapshot, changes in saved:
        job.version += 1
        rows.append(JobVersion(job=job, number=job.version, author=user, author_name=author_name[:255],
                               values=kept(snapshot), changes=changes or {}, detail=detail[:255]))
    JobVersion.objects.bulk_create(rows, batch_size=2000)
    ids = [job.pk for job, _, _ in saved]
    for start in range(0, len(ids), 10000):
        Job.objects.filter(pk__in=ids[start:start + 10000]).update(version=F("version") + 1)
