"""The trail's hash chain: each entry stores ``prev_hash``, the hash of the entry before it, and
``hash``, a SHA-256 of its own words and that ``prev_hash``. Changing an entry's words breaks its
hash; deleting an entry breaks the next one's ``prev_hash``.

What is hashed is the record: when, what (subject, name, action), who (actor_name), from where
(source, address), the changes and the detail. The links to a job, a user or a run are not: they
are cleared when what they link is deleted (a run deleted by retention, a user removed), and the
words keep what they said.

Entries are appended one at a time under a lock (``lock``), so two transactions never both read the
same tail and fork the chain: PostgreSQL's ``pg_advisory_xact_lock``, held until the appending
transaction ends; SQLite (``transaction_mode`` IMMEDIATE) has one writer at a time already.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC

from django.db import connections

LOCK = 0x61756474  # pg_advisory_xact_lock key of the trail's tail ("audt")
HASHED = ("created_at", "subject", "job_name", "action", "actor_name", "source", "remote_addr", "changes", "detail")


def canonical(entry, prev_hash):
    """The bytes an entry's hash covers: its words as sorted, compact JSON, with ``prev_hash``."""
    fields = {name: getattr(entry, name) for name in HASHED}
    fields["created_at"] = fields["created_at"].astimezone(UTC).isoformat(timespec="microseconds")
    # Through JSON and back, as the database keeps it: tuples become lists, keys strings.
    fields["changes"] = json.loads(json.dumps(fields["changes"]))
    fields["prev_hash"] = prev_hash
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(entry, prev_hash):
    return hashlib.sha256(canonical(entry, prev_hash)).hexdigest()


def locked_tail(using, table):
    """The newest entry's hash ("" for none), holding the tail until this transaction ends (call
    inside ``transaction.atomic``)."""
    connection = connections[using]
    tail = f"SELECT hash FROM {table} ORDER BY id DESC LIMIT 1"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One round trip, two statements: the tail is read by a statement of its own, whose
            # snapshot (READ COMMITTED) is taken once the lock is held, so it sees the last holder's commit.
            cursor.execute(f"SELECT pg_advisory_xact_lock({LOCK}); {tail}")
            cursor.nextset()
        else:
            cursor.execute(tail)
        row = cursor.fetchone()
    return row[0] if row else ""


def link(entries, prev_hash):
    """Chain ``entries`` (unsaved, in order) after ``prev_hash``."""
    for entry in entries:
        entry.prev_hash = prev_hash
        entry.hash = prev_hash = digest(entry, prev_hash)
    return entries


@dataclass
class Verdict:
    ok: bool
    count: int  # entries checked
    head: str = ""  # the newest entry's hash: keep it elsewhere to notice a truncated trail
    problem: str = ""


def verify(entries, anchor=None):
    """Walk ``entries`` (oldest first). The first must start the trail (``prev_hash`` empty) or,
    after a pruning, start where the pruning said (``anchor``: (first kept id or None, prev hash);
    entries before that id are expired and being deleted, so not checked). Returns a Verdict naming
    the first entry changed or missing."""
    first_id, anchor_hash = anchor if anchor else (None, "")
    previous, count, head = None, 0, ""
    for entry in entries:
        if previous is None and first_id is not None and entry.pk < first_id:
            continue
        expected = head if previous is not None else anchor_hash
        if not entry.hash:
            return Verdict(False, count, head, f"unchained: entry #{entry.pk} has no hash (written by a process of "
                                               "the previous release during an upgrade? the next entry appended "
                                               "chains it)")
        if entry.prev_hash != expected:
            where = (f"between entry #{previous.pk} and entry #{entry.pk}" if previous is not None
                     else f"before entry #{entry.pk}, the first one")
            return Verdict(False, count, head, f"missing: an entry is missing {where} (the prev hash of #{entry.pk} "
                                               "does not match the hash before it)")
        if digest(entry, entry.prev_hash) != entry.hash:
            return Verdict(False, count, head, f"changed: entry #{entry.pk} ({entry.created_at:%Y-%m-%d %H:%M:%S} "
                                               f"{entry.action} {entry.subject} {entry.job_name!r}) does not match "
                                               "its hash")
        previous, head, count = entry, entry.hash, count + 1
    return Verdict(True, count, head)
