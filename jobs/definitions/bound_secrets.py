"""Secret values stay bound to where they were given. A stored secret value was given for one kind
of job and one destination (an HTTP job's scheme, host and port): a change of the kind or of the
destination that keeps it would send it somewhere its author never chose (whoever may edit the
job could point it at their own host). Such a change must give the values again, or clear them.

Kept means the stored token itself: a value given again is encrypted anew (``jobs.access.secrets.seal``),
so this holds the same way for the API, the pages, the admin and jobs files.
"""

from .. import kinds
from ..access import secrets

LABELS = {"secret_environment": "secret environment values", "secret_http_headers": "secret headers"}


def kept_secrets(stored, job):
    """The secret fields of ``job`` that keep at least one of ``stored``'s values."""
    kept = []
    for name in secrets.FIELDS:
        old, new = getattr(stored, name) or {}, getattr(job, name) or {}
        if isinstance(old, dict) and isinstance(new, dict) and any(new.get(k) == token for k, token in old.items()):
            kept.append(name)
    return kept


def _destination(job):
    spec = kinds.get(job.kind)
    return spec.destination(job) if spec is not None else None


def refusals(stored, job):
    """{field: message} for each secret field whose kept values a change of kind or destination
    would carry elsewhere; {} when the change keeps none, or moves nothing."""
    kept = kept_secrets(stored, job)
    if not kept:
        return {}
    if stored.kind != job.kind:
        moved = f"The job's kind changed from {stored.kind} to {job.kind}"
    else:
        before, after = _destination(stored), _destination(job)
        if before == after:
            return {}
        moved = f"The target moved from {before or stored.target} to {after or job.target}"
    return {name: f"{moved}; give the {LABELS.get(name, name)} again (or clear them) to send them there."
            for name in kept}
