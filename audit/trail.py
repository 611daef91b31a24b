"""Recording the audit trail: one plain function every entry point calls (admin, pages, API, CLI).

``snapshot`` before and after a change, ``record`` with the diff. Values of the job's environment
and HTTP headers are never written to the trail (they hold secrets): the entry names the keys, and
marks a key whose value changed.
"""

import getpass
import socket
from datetime import datetime

from jobs.definitions import schedule_of

from .models import Action, AuditEntry, Source

SECRET_FIELDS = ("environment", "http_headers")
HIDDEN = "•••"
TRACKED = [
    "name", "description", "owner", "group", "tags", "kind", "target", "args", "kwargs", "environment",
    "http_method", "http_headers", "http_body", "http_ok_statuses", "schedule", "catchup_policy",
    "catchup_max", "overlap_policy", "start_deadline_seconds", "jitter_seconds", "memory_limit_mb",
    "cpu_limit_seconds", "max_open_files", "max_processes", "working_directory", "enabled", "queue",
    "max_retries", "retry_backoff_seconds", "retry_backoff_max_seconds", "retry_jitter", "timeout_seconds",
    "sla_seconds",
]


def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def snapshot(job):
    """The job's defining fields as JSON values (the schedule as the API's schedule object)."""
    values = {}
    for name in TRACKED:
        if name == "schedule":
            values[name] = _plain(schedule_of(job))
        elif name == "owner":
            values[name] = job.owner.get_username() if job.owner_id else None
        elif name == "group":
            values[name] = job.group.name if job.group_id else None
        else:
            values[name] = _plain(getattr(job, name))
    return values


def diff(before, after):
    """{field: [old, new]} of the fields that differ; ``before`` or ``after`` may be None (create,
    delete). Secret fields show their keys only."""
    before, after = before or {}, after or {}
    changes = {}
    for name in TRACKED:
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if name in SECRET_FIELDS:
            old, new = _hide(old, new)
        changes[name] = [old, new]
    return changes


def _hide(old, new):
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    hidden_old = {key: HIDDEN for key in old}
    hidden_new = {key: f"{HIDDEN} (changed)" if key in old and old[key] != new[key] else HIDDEN for key in new}
    return hidden_old or None, hidden_new or None


def client_address(request):
    # REMOTE_ADDR, as the web server saw it: behind a proxy that is the proxy's address (headers
    # such as X-Forwarded-For are set by the client unless a trusted proxy rewrites them).
    return request.META.get("REMOTE_ADDR", "") if request is not None else ""


def record(job, action, source, *, request=None, user=None, changes=None, run=None, detail=""):
    """Write one audit entry. ``request`` gives the user and address (admin, pages, API); on the
    command line leave it out: the entry names the OS user and the host."""
    if request is not None:
        user = getattr(request, "user", None)
        if user is not None and not user.is_authenticated:
            user = None
        actor_name = user.get_username() if user else "anonymous"
        remote = client_address(request)
    else:
        actor_name = user.get_username() if user else _os_user()
        remote = socket.gethostname() if source == Source.CLI else ""
    if run is not None and not detail:
        detail = f"run #{run.pk}"  # kept in words: the run may be deleted before the entry
    return AuditEntry.objects.create(
        job=job if job is not None and job.pk else None,
        job_name=getattr(job, "name", "")[:200], action=Action(action), actor=user, actor_name=actor_name[:255],
        source=Source(source), remote_addr=remote[:255], changes=changes or {}, run=run, detail=detail[:255],
    )


def _os_user():
    try:
        return f"{getpass.getuser()} (OS user)"
    except Exception:  # no login name in a container without a passwd entry
        return "unknown (OS user)"
