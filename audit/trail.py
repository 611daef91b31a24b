"""Writing the audit trail: one entry per user action, written by the action itself
(``jobs.actions``) in the same transaction as the change.

The trail knows nothing of what a job is: the caller gives the changes as {field: [old, new]}
(``jobs.actions.snapshot`` builds them, with secret values hidden) and says who acted, from where
(``client_address``: the client behind the trusted proxies).
"""

import contextvars
from contextlib import contextmanager

from django.conf import settings

import outbound

from .models import Action, AuditEntry, Source, Subject

SYSTEM = "system"  # the actor of a change no person is known to have made (a migration, a shell)

_request = contextvars.ContextVar("audit_request", default=None)


@contextmanager
def during(request):
    """Changes made by signal handlers (users, groups, permissions) while this runs are the
    request's user's (``audit.middleware``)."""
    token = _request.set(request)
    try:
        yield
    finally:
        _request.reset(token)


def source_of(request):
    path = getattr(request, "path", "") or ""
    return Source.ADMIN if path.startswith("/admin/") else Source.API if path.startswith("/api/") else Source.PAGE


def current_actor():
    """(user, name, source, address) of whoever is acting now: the request's user, else "system"."""
    request = _request.get()
    if request is None:
        return None, SYSTEM, Source.SYSTEM, ""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None, SYSTEM, source_of(request), client_address(request)
    return user, user.get_username(), source_of(request), client_address(request)


def client_address(request):
    """The client's address: REMOTE_ADDR, or behind the proxies of TRUSTED_PROXIES the last
    address of X-Forwarded-For that is not one of them. Entries left of that were written by the
    client and are not believed."""
    return "" if request is None else client_address_of(request.META)


def client_address_of(environ):
    """``client_address`` from a request's WSGI environ (or Django's ``request.META``)."""
    remote = environ.get("REMOTE_ADDR", "")
    trusted = outbound.parse_networks(settings.TRUSTED_PROXIES)
    if not trusted or not _within(remote, trusted):
        return remote
    hops = [hop.strip() for hop in environ.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _within(hop, trusted):
            return hop if outbound.literal_address(hop) is not None else ""
    return hops[0] if hops else remote


def _within(address, networks):
    ip = outbound.literal_address(address) if address else None
    return ip is not None and any(ip.version == net.version and ip in net for net in networks)


def shown_actor(entry):
    """Who acted, as anyone but staff is shown it: on the command line not the OS user (only the
    user of ``--as USER``, else "an operator")."""
    if entry.source != Source.CLI:
        return entry.actor_name
    if entry.actor_id is not None:
        return entry.actor_name.split(" (", 1)[0]  # "alice (root (OS user))"; a user name has no " ("
    return "an operator"


def shown_to(user, entries):
    """``entries`` (a list) as ``user`` may see them: staff see all; others not the client's address
    nor the host, nor the OS user of command-line entries. The entries are changed in memory only."""
    entries = list(entries)
    if not user.is_staff:
        for entry in entries:
            entry.actor_name, entry.remote_addr = shown_actor(entry), ""
    return entries


def record(job, action, source, *, actor_name, user=None, address="", changes=None, run=None, detail=""):
    """Write one audit entry about ``job`` (or a job being deleted) by ``user`` (None on the
    command line, where ``actor_name`` names the OS user and ``address`` the host)."""
    entry = entry_of(job, action, source, actor_name=actor_name, user=user, address=address, changes=changes,
                     run=run, detail=detail)
    entry.save()
    return entry


def record_many(entries):
    """Write many entries made by ``entry_of`` at once (an apply of many jobs)."""
    return AuditEntry.objects.bulk_create(entries, batch_size=2000)


def entry_of(job, action, source, *, actor_name, user=None, address="", changes=None, run=None, detail="",
             name=None):
    """The entry ``record`` writes, unsaved; ``name`` in place of the job's (an entry about many)."""
    if run is not None and not detail:
        detail = f"run #{run.pk}"  # kept in words: the run may be deleted before the entry
    return AuditEntry(
        job=job if job is not None and job.pk else None,
        job_name=(name if name is not None else getattr(job, "name", ""))[:200], action=Action(action), actor=user, actor_name=actor_name[:255],
        source=Source(source), remote_addr=address[:255], changes=changes or {}, run=run, detail=detail[:255],
    )


def record_about(subject, name, action, source, *, actor_name, user=None, address="", changes=None, detail=""):
    """Write one audit entry about something that is not a job: a workflow, a channel, a rule, or the
    secrets (``secrets rotate``), named by ``name``."""
    entry = AuditEntry(
        subject=Subject(subject), job_name=str(name)[:200], action=Action(action), actor=user,
        actor_name=actor_name[:255], source=Source(source), remote_addr=address[:255], changes=changes or {},
        detail=detail[:255],
    )
    entry.save()
    return entry
