"""The trail is kept for AUDIT_RETENTION_DAYS, apart from the runs (JOBS_RETENTION_DAYS): the runs'
retention pass calls ``prune`` with its own cutoff.

A pruning keeps the chain verifiable (``audit.chain``): first it appends an entry (subject "trail",
action "prune") that names the first entry kept and that entry's ``prev_hash``, the anchor the
verification starts from; then it deletes the entries before, in batches. Entries before the first
kept one are expired: verification skips any left by a pass that was interrupted.
"""

from django.db import transaction

from . import chain
from .models import Action, AuditEntry, Source, Subject
from .trail import SYSTEM, record_about

BATCH = 5000


def prune(before, batch=BATCH):
    """Delete the entries created before ``before``, in batches so no transaction holds a large
    lock; returns how many were deleted."""
    with transaction.atomic():
        AuditEntry.locked_tail(AuditEntry.objects.db)  # no entry is appended meanwhile
        first_kept = (AuditEntry.objects.filter(created_at__gte=before).order_by("id")
                      .values_list("id", "prev_hash").first())
        doomed = AuditEntry.objects.filter(id__lt=first_kept[0]) if first_kept else AuditEntry.objects.all()
        last = doomed.order_by("-id").values_list("id", "hash").first()
        if last is None:
            return 0
        # Kept: from ``first_kept`` on, or only this entry when every other one expired.
        first_id, anchor = first_kept if first_kept else (None, last[1])
        record_about(Subject.TRAIL, "audit trail", Action.PRUNE, Source.SYSTEM, actor_name=SYSTEM,
                     changes={"first_kept": [None, first_id], "anchor": [None, anchor]},
                     detail=f"entries up to #{last[0]}, created before {before.isoformat()}, deleted")
    deleted = 0
    while ids := list(AuditEntry.objects.filter(id__lte=last[0]).order_by("id").values_list("pk", flat=True)[:batch]):
        deleted += AuditEntry.objects.filter(pk__in=ids).delete()[0]
    return deleted


def anchor():
    """Where verification starts: (the first kept entry's id, its prev hash) of the latest
    pruning, or None when the trail was never pruned."""
    pruning = AuditEntry.objects.filter(subject=Subject.TRAIL, action=Action.PRUNE).order_by("-id").first()
    if pruning is None:
        return None
    first_id = pruning.changes["first_kept"][1]
    return (pruning.pk if first_id is None else first_id), pruning.changes["anchor"][1]


def verify(chunk=2000):
    """The trail checked from its anchor to its newest entry (``audit.chain.Verdict``)."""
    return chain.verify(AuditEntry.objects.order_by("id").iterator(chunk_size=chunk), anchor())
