"""API tokens (``Authorization: Token <key>``): made for a user, shown once, kept as a hash.

django-rest-knox stores a SHA-512 of each key and the key's first 15 characters (its prefix, which
names the token in lists); a key expires after API_TOKEN_TTL_DAYS (0: never) and answers 401 from
then on. A user makes and revokes their own on the "API tokens" page; ``manage.py tokens`` does it
for anyone. Refused tokens count as failed logins in django-axes (under the name "(API token)"): a
client address that sends LOGIN_FAILURE_LIMIT of them is refused (429) for LOGIN_LOCKOUT_MINUTES,
even with a good token.

Making and revoking a token is in the audit trail (``jobs.actions.tokens``, which the pages, the API
and ``manage.py tokens`` call) and logged (logger ``jobs.tokens``), with the prefix, never the key.
"""

import logging
from datetime import timedelta

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db.models import Q
from django.utils import timezone
from knox import auth
from knox.models import AuthToken
from knox.settings import CONSTANTS
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header

log = logging.getLogger("jobs.tokens")  # the name operators filter on, from before the module moved
TOKEN_CREDENTIALS = {"username": "(API token)"}  # the name axes counts refused tokens under


class TooManyTokens(Exception):
    pass


def create(user, days=None):
    """A new token of ``user``: (the token, its key). ``days``: its lifetime (0: none), else
    API_TOKEN_TTL_DAYS'. A user holds at most API_TOKENS_PER_USER live tokens: a session taken
    over cannot mint keys without end."""
    if of_user(user).count() >= settings.API_TOKENS_PER_USER:
        raise TooManyTokens(f"{user.get_username()} already has {settings.API_TOKENS_PER_USER} tokens (the most "
                            "API_TOKENS_PER_USER allows): revoke one first.")
    days = settings.API_TOKEN_TTL_DAYS if days is None else days
    token, key = AuthToken.objects.create(user, expiry=timedelta(days=days) if days else None)
    log.info("API token %s made for %s, expires %s", token.token_key, user.get_username(), token.expiry or "never")
    return token, key


def live(tokens=None):
    """The tokens not expired yet, newest first."""
    tokens = AuthToken.objects.all() if tokens is None else tokens
    return tokens.filter(Q(expiry__isnull=True) | Q(expiry__gt=timezone.now())).order_by("-created")


def of_user(user):
    return live(AuthToken.objects.filter(user=user))


def revoke(prefix, user=None):
    """Revoke the token named by ``prefix``, its key's first 15 characters (or the whole key), and
    ``user``'s only if given: [(its prefix, its user's name)] of those revoked."""
    tokens = AuthToken.objects.filter(token_key=prefix.strip()[:CONSTANTS.TOKEN_KEY_LENGTH])
    if user is not None:
        tokens = tokens.filter(user=user)
    revoked = [(token.token_key, token.user.get_username()) for token in tokens.select_related("user")]
    tokens.delete()
    for prefix, username in revoked:
        log.info("API token %s of %s revoked", prefix, username)
    return revoked


class TokenAuthentication(auth.TokenAuthentication):
    """Knox's token authentication, each refused token counted by axes, and an address locked out
    refused before its token is looked at."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.authenticate_header(request).encode().lower():
            return None  # another scheme, or none: not a token
        client = request._request
        if not AxesProxyHandler.is_allowed(client, TOKEN_CREDENTIALS):
            raise exceptions.Throttled(
                wait=settings.AXES_COOLOFF_TIME.total_seconds(),
                detail="Too many refused tokens from this address: it is locked out.")
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            user_login_failed.send(sender=__name__, credentials=TOKEN_CREDENTIALS, request=client)
            client.axes_locked_out = False  # this answer stays the API's 401, not axes' HTML page
            raise
