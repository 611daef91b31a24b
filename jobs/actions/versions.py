"""Restoring an earlier version of a job: an edit (``jobs.edit``) back to what that version was,
audited as a change ("restored version N") and itself the job's next version.

What a restore leaves as it is: the job's owner and team (who holds it is not part of what it
does), whether it is enabled (a restore does not pause or resume it), and its secret values (a
version never keeps them). A version that names a limit or calendar gone since, or a kind the
actor may not use, is refused as that edit would be.

``History``: what the interfaces (the API's versions calls, the pages' versions table) need of the
versions of a job or a workflow (``workflows.actions.HISTORY``), the one of either."""

from collections.abc import Callable
from dataclasses import dataclass

from ..definitions import versions as job_versions
from ..models import Job
from .jobs import edit
from .snapshot import diff, shown, snapshot

NOT_RESTORED = ("owner", "group", "enabled", "schedule")


def restore(actor, job, version):
    """Make ``job`` what its ``version`` (a ``JobVersion`` of it) was: (the job, whether anything
    changed; when nothing did, no version is made)."""
    values = {name: Job._meta.get_field(name).to_python(value)
              for name, value in job_versions.kept(version.values).items()
              if name not in NOT_RESTORED and name in snapshot(job)}
    return restored(job, version, lambda schedule, detail: edit(actor, job, values, schedule, detail=detail),
                    snapshot(job)["schedule"])


def restored(versioned, version, save, schedule_now):
    """``save(schedule, detail)``, the edit back to ``version`` (of a job or a workflow): (what it
    saved, whether that made a version). The version's schedule is given only when it differs from
    ``schedule_now``: the same one is left alone, its next slot kept."""
    schedule = version.values.get("schedule")
    before = versioned.version
    saved = save(None if schedule == schedule_now else schedule, f"restored version {version.number}")
    return saved, saved.version != before


def as_kept(values):
    return values


@dataclass(frozen=True)
class History:
    """The versions of one kind of thing (``noun``) as the interfaces show and restore them."""

    noun: str
    diff: Callable  # (values, values): {field: [in the first, in the second]}
    restore: Callable  # (actor, it, version): (it, whether a version was made)
    shown: Callable = as_kept  # a version's values as they may be shown (a job's private ones hidden)

    def changes_of(self, version):
        """What a version changed: for the first (which keeps none), all its values."""
        return version.changes or self.diff(None, version.values)

    def version_of(self, versioned, number):
        """Its version ``number`` (1, 2, ...), or None for 0 or one it does not have."""
        return versioned.versions.filter(number=number).first() if number >= 1 else None

    def missing(self, number):
        return f"The {self.noun} has no version {number}."


JOBS = History("job", diff, restore, shown)
