"""Leases in the database: one holder at a time, and an epoch that fences a holder that was replaced.

A lease is a row (``jobs.models.Lease``). A process takes it once it has expired, which raises its
epoch, and keeps it by renewing it before it expires. Every time involved is the database's clock
(``now()``), never a host's, so hosts whose clocks disagree still agree on who holds it.

Work done under a lease calls ``fence`` inside its own transaction, just before committing: the row
is locked until the commit, and the transaction rolls back unless the epoch is still the one it was
taken with. Another process can take the lease only by raising the epoch, which needs that lock,
so a holder that was paused past its lease while another took over can never commit.
"""

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.backends.signals import connection_created
from django.db.models import BooleanField, DateTimeField, ExpressionWrapper, Q
from django.db.models.functions import Now

from ..models import Lease

NEVER = datetime(1970, 1, 1, tzinfo=UTC)
# A process waits at most this long for a lease row locked by a holder's commit in progress.
LOCK_TIMEOUT_MS = 1000


class LeaseLost(Exception):
    """The lease was taken by another process: the work done under it must not commit."""


class Held(NamedTuple):
    name: str
    holder: str
    epoch: int


def _expiry(ttl):
    return ExpressionWrapper(Now() + timedelta(seconds=ttl), output_field=DateTimeField())


def _lock_timeout(cursor, milliseconds):
    if connection.vendor == "postgresql":
        cursor.execute(f"SET LOCAL lock_timeout = {int(milliseconds)}")


def take(name, holder, ttl):
    """Take the lease if it is free or expired: ``Held`` with the new epoch, or None."""
    with transaction.atomic(), connection.cursor() as cursor:
        _lock_timeout(cursor, LOCK_TIMEOUT_MS)
        epoch = Lease.objects.filter(name=name).values_list("epoch", flat=True).first()
        if epoch is None:
            try:
                with transaction.atomic():
                    Lease.objects.create(name=name, expires_at=NEVER)
            except IntegrityError:
                pass  # another process created it first
            epoch = Lease.objects.filter(name=name).values_list("epoch", flat=True).get()
        taken = Lease.objects.filter(name=name, epoch=epoch, expires_at__lte=Now()).update(
            epoch=epoch + 1, holder=holder, acquired_at=Now(), expires_at=_expiry(ttl))
    return Held(name, holder, epoch + 1) if taken else None


def renew(held, ttl):
    """Extend a lease that is still ours and not expired; whether it was."""
    with transaction.atomic(), connection.cursor() as cursor:
        _lock_timeout(cursor, LOCK_TIMEOUT_MS)
        return bool(Lease.objects.filter(name=held.name, epoch=held.epoch, expires_at__gt=Now())
                    .update(expires_at=_expiry(ttl)))


def release(held):
    """Give the lease up at once (a standby need not wait for it to expire)."""
    Lease.objects.filter(name=held.name, epoch=held.epoch).update(expires_at=Now())


def limit_pause(idle_timeout):
    """In the caller's transaction, before it locks anything: a holder paused in it (SIGSTOP, a
    stalled host) for longer than ``idle_timeout`` seconds loses its session to PostgreSQL, and
    with it the rows it locked, which a standby that took over would otherwise skip or wait for."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = {_milliseconds(idle_timeout)}")


def limit_pauses(idle_timeout):
    """``limit_pause`` for every transaction of this process's database sessions, from now on: the
    scheduler's, whose leader also locks runs in transactions of its own besides its tick (the
    waiting runs of paused jobs, retries due, lost attempts), which a standby passes by (SKIP
    LOCKED) or waits for while a paused holder keeps them. Returns what undoes it (for tests)."""
    statement = f"SET idle_in_transaction_session_timeout = {_milliseconds(idle_timeout)}"

    def limit(sender=None, connection=None, **kwargs):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(statement)

    uid = "jobs.leases.limit_pauses"
    connection_created.connect(limit, weak=False, dispatch_uid=uid)
    if connections[DEFAULT_DB_ALIAS].connection is not None:  # opened already: from now on too
        limit(connection=connections[DEFAULT_DB_ALIAS])
    return lambda: connection_created.disconnect(dispatch_uid=uid)


def _milliseconds(seconds):
    return max(1, int(seconds * 1000))


def fence(held, idle_timeout):
    """In the caller's transaction: lock the lease row until the commit, or raise LeaseLost when
    another process took the lease. ``idle_timeout`` (seconds) bounds how long a holder paused
    between this and its commit can keep a standby waiting (``limit_pause``)."""
    limit_pause(idle_timeout)
    mine = Lease.objects.select_for_update(no_key=True).filter(name=held.name, epoch=held.epoch)
    if not list(mine.values_list("pk", flat=True)):
        raise LeaseLost(f"lease {held.name!r} epoch {held.epoch} was taken by another process")


def note_tick(held):
    """Record the holder's last housekeeping pass (jobs_scheduler_last_tick_timestamp_seconds)."""
    Lease.objects.filter(name=held.name, epoch=held.epoch).update(last_tick_at=Now())


def state(name):
    """{'holder': name or None when nobody holds it now, 'since', 'epoch', 'last_tick_at'}, or None
    when the lease was never taken."""
    row = (Lease.objects.filter(name=name)
           .annotate(held=ExpressionWrapper(Q(expires_at__gt=Now(), epoch__gt=0), output_field=BooleanField()))
           .values("holder", "acquired_at", "epoch", "last_tick_at", "held").first())
    if row is None:
        return None
    held = row["held"]
    return {"holder": row["holder"] if held else None, "since": row["acquired_at"] if held else None,
            "epoch": row["epoch"], "last_tick_at": row["last_tick_at"]}
