"""What a person does to an API token, with its audit entry (subject "token", named by the token's
user, so that user sees it): make one, revoke one. The pages, the API and ``manage.py tokens`` call
these with a ``jobs.actions.jobs.Actor``; the entry names the token by its prefix, never its key."""

from django.db import transaction

from audit import trail
from audit.models import Action, Subject

from ..access import tokens

TooManyTokens = tokens.TooManyTokens


def _record(actor, username, action, detail):
    trail.record_about(Subject.TOKEN, username, action, actor.source, actor_name=actor.name, user=actor.user,
                       address=actor.address, detail=detail)


def create(actor, user, days=None):
    """A new token of ``user``: (the token, its key)."""
    with transaction.atomic():
        token, key = tokens.create(user, days)
        expires = token.expiry.isoformat() if token.expiry else "never"
        _record(actor, user.get_username(), Action.CREATE, f"token {token.token_key}, expires {expires}")
    return token, key


def revoke(actor, prefix, user=None):
    """Revoke the token named by ``prefix`` (``user``'s only, if given): how many were."""
    with transaction.atomic():
        revoked = tokens.revoke(prefix, user)
        for token_key, username in revoked:
            _record(actor, username, Action.REVOKE, f"token {token_key}")
    return len(revoked)
