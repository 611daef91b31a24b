"""Audit entries are kept as long as runs are: the run retention calls ``prune``."""

from .models import AuditEntry

BATCH = 5000


def prune(before, batch=BATCH):
    """Delete the entries created before ``before``, in batches so no transaction holds a large
    lock; returns how many were deleted."""
    deleted = 0
    while True:
        ids = list(AuditEntry.objects.filter(created_at__lt=before).order_by("created_at")
                   .values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += AuditEntry.objects.filter(pk__in=ids).delete()[0]
