"""Restoring an earlier version of a job: an edit (``jobs.edit``) back to what that version was,
audited as a change ("restored version N") and itself the job's next version.

What a restore leaves as it is: the job's owner and team (who holds it is not part of what it
does), whether it is enabled (a restore does not pause or resume it), and its secret values (a
version never keeps them). A version that names a limit or calendar gone since, or a kind the
actor may not use, is refused as that edit would be."""

from ..definitions import versions as job_versions
from ..models import Job
from .jobs import edit
from .snapshot import diff, snapshot

NOT_RESTORED = ("owner", "group", "enabled", "schedule")


def restore(actor, job, version):
    """Make ``job`` what its ``version`` (a ``JobVersion`` of it) was: (the job, whether anything
    changed; when nothing did, no version is made)."""
    values = {name: Job._meta.get_field(name).to_python(value)
              for name, value in job_versions.kept(version.values).items()
              if name not in NOT_RESTORED and name in snapshot(job)}
    schedule = version.values.get("schedule")
    if schedule == snapshot(job)["schedule"]:
        schedule = None  # the same schedule: left alone, its next slot kept
    before = job.version
    job = edit(actor, job, values, schedule, detail=f"restored version {version.number}")
    return job, job.version != before


def changes_of(version):
    """What a version changed: for a new job's first (which keeps none), all its values."""
    return version.changes or diff(None, version.values)
