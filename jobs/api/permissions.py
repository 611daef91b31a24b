"""Who sees and changes which jobs.

A user sees the jobs they own and those of their groups; staff see all. Runs follow their job.
Anything a user cannot see answers 404, never 403, so ids do not leak what exists.
"""

from django.db.models import Q

from ..models import Job, JobKind, JobRun


def sees_everything(user):
    return user.is_staff or user.is_superuser


def owned_or_shared(queryset, user):
    """The rows of ``queryset`` (with ``owner`` and ``group``) that ``user`` may see."""
    if sees_everything(user):
        return queryset
    return queryset.filter(Q(owner=user) | Q(group__in=user.groups.all()))


def visible_jobs(user):
    return owned_or_shared(Job.objects.all(), user)


def visible_runs(user):
    runs = JobRun.objects.all()
    if sees_everything(user):
        return runs
    return runs.filter(job__in=visible_jobs(user))


def may_manage_command_jobs(user):
    """A command job runs a shell command on the workers: only staff or holders of
    ``jobs.change_job`` may create, change or delete one."""
    return sees_everything(user) or user.has_perm("jobs.change_job")


def touches_command_job(job, data):
    """Whether a write (``data``: the request body, or None for a delete) concerns a command job,
    before or after the change."""
    kinds = {getattr(job, "kind", None)}
    if isinstance(data, dict):
        kinds.add(data.get("kind"))
    return JobKind.COMMAND in kinds
