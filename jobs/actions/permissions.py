"""Who sees which jobs, and who may do what to them.

A Django group is a team. A user sees the jobs they own and those of their groups; staff see all.
Runs follow their job. Limits, calendars, channels and rules follow the same rule, and those of
them marked ``shared`` (by staff) are seen and used by everyone (``owned_or_shared``).
Anything a user cannot see answers 404, never 403, so ids do not leak what exists.

Command jobs run a shell command on the workers: creating, changing, running, pausing, resuming,
backfilling, cancelling or deleting one needs the ``jobs.run_command_jobs`` permission, which the
"Command job runners" group carries (made on migrate; add people to it in the admin). Being staff
is not enough. Queues are named in ``JOBS_QUEUES``, each open to everyone or to some groups.
"""

from django.conf import settings
from django.db.models import Q

from .. import kinds
from ..models import Job, JobRun


def sees_everything(user):
    return user.is_staff or user.is_superuser


def owned_or_shared(queryset, user):
    """The rows of ``queryset`` (with ``owner`` and ``group``, and maybe ``shared``) that ``user``
    (None: the operator on the command line) may see and use."""
    if user is None or sees_everything(user):
        return queryset
    # The groups as a list of ids, not a subquery: "owner = u OR group IN (1, 2)" is two index scans
    # the planner can estimate, where the subquery made it read every job, in each query of a page
    # that filters runs by the user's jobs (bench/pages.py, an owner of 100 of 10,000 jobs).
    # Kept on the user for the request, as Django keeps its permissions (_perm_cache).
    if not hasattr(user, "_job_group_ids"):
        user._job_group_ids = list(user.groups.values_list("pk", flat=True))
    mine = Q(owner=user) | Q(group__in=user._job_group_ids)
    if any(field.name == "shared" for field in queryset.model._meta.concrete_fields):
        mine |= Q(shared=True)
    return queryset.filter(mine)


def may_change_owned(user, row):
    """Whether ``user`` (None: the operator) may change or delete ``row`` (a limit, a calendar, a
    channel, a rule): staff any; others what they see that is not shared."""
    if user is None or sees_everything(user):
        return True
    if getattr(row, "shared", False):
        return False
    return row.pk is None or owned_or_shared(type(row).objects.filter(pk=row.pk), user).exists()


def ownership_refusal(user, group, shared, stored=None):
    """Why ``user`` (None: the operator) may not give a row this ``group`` (a Group or None) and
    ``shared`` flag, as {field: [message]}, or None. ``stored``: the row before the change (an
    unchanged group or flag is never refused)."""
    if user is None or sees_everything(user):
        return None
    errors = {}
    if group is not None and group.pk != getattr(stored, "group_id", None) \
            and not user.groups.filter(pk=group.pk).exists():
        errors["group"] = [f"You are not in the group {group.name}: name one of your own groups (teams)."]
    if shared and not getattr(stored, "shared", False):
        errors["shared"] = ["Only staff may share something with everyone."]
    return errors or None


def visible_jobs(user):
    return owned_or_shared(Job.objects.all(), user)


def visible_runs(user):
    return following(JobRun.objects.all(), "job", visible_jobs, user)


def following(queryset, parent, visible, user):
    """The rows of ``queryset`` whose ``parent`` (a job, a workflow) is among ``visible(user)``."""
    if sees_everything(user):
        return queryset
    return queryset.filter(**{f"{parent}__in": visible(user)})


RUN_COMMAND_JOBS = "jobs.run_command_jobs"
COMMAND_RUNNERS_GROUP = "Command job runners"
COMMAND_JOBS_DENIED = (f"Command jobs need the {RUN_COMMAND_JOBS} permission (the '{COMMAND_RUNNERS_GROUP}' "
                       "group): only its holders may create, change, delete, run, pause, resume, backfill or "
                       "cancel them.")


def guarded_kinds():
    """The kinds whose jobs need the permission (command jobs: ``needs_permission`` in jobs.kinds)."""
    return kinds.needing_permission()


def may_run_command_jobs(user):
    return bool(user and user.is_active and user.has_perm(RUN_COMMAND_JOBS))


def touches_command_job(job, data):
    """Whether a write (``data``: the request body, or None for an action) concerns a command job,
    before or after the change."""
    named = {getattr(job, "kind", None)}
    if isinstance(data, dict):
        named.add(data.get("kind"))
    return bool(named & guarded_kinds())


def may_act_on(user, job):
    """Whoever sees a job may act on it, unless it is a command job (see above)."""
    return job.kind not in guarded_kinds() or may_run_command_jobs(user)


def queue_refusal(user, queue):
    """Why ``user`` (None: the operator on the command line) may not put a job on ``queue`` (blank:
    the default queue), or None."""
    queue = queue or settings.JOBS_DEFAULT_QUEUE
    queues = settings.JOBS_QUEUES
    if queue not in queues:
        return f"Not a queue of this service; the queues are: {', '.join(sorted(queues))} (JOBS_QUEUES)."
    groups = queues[queue]
    if groups is None or user is None or user.is_superuser:
        return None
    if user is not None and user.is_active and user.groups.filter(name__in=groups).exists():
        return None
    return f"The queue {queue} is for the group(s) {', '.join(groups)} (JOBS_QUEUES)."


def ensure_command_runners_group(**kwargs):
    """post_migrate: the group exists and carries the permission (after a test database flush too)."""
    from django.contrib.auth.models import Group, Permission

    permission = Permission.objects.filter(content_type__app_label="jobs", codename="run_command_jobs").first()
    if permission is None:  # permissions not made yet (another app's post_migrate comes first)
        return
    group, _ = Group.objects.get_or_create(name=COMMAND_RUNNERS_GROUP)
    group.permissions.add(permission)
