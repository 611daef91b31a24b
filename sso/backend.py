"""The authentication backend of the sign-on callback (AUTHENTICATION_BACKENDS, when it is on)."""

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .accounts import sign_on


class TeamsFromClaims(OIDCAuthenticationBackend):
    """mozilla-django-oidc's code flow (token, ID token checked against the provider's keys and the
    nonce, userinfo), with the account found by the provider's subject rather than by e-mail, and teams
    from the groups claim (sso.accounts). Nothing from the claims makes anyone staff or superuser."""

    def authenticate(self, request, **kwargs):
        # Only the callback asks with a nonce; a password login (which may carry ?code= in its URL)
        # is never exchanged at the provider.
        if request is None or "nonce" not in kwargs or "password" in kwargs or not settings.OIDC_ENABLED:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        # mozilla-django-oidc leaves the audience unchecked: an ID token made for another client of the
        # same provider is not ours.
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token was issued to another client.")
        return payload

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(claims, dict) or claims.get("sub") != payload.get("sub"):
            # OpenID Connect Core 5.3.2: the userinfo answer is about the ID token's subject, or ignored.
            raise SuspiciousOperation("The userinfo answer is not about the ID token's subject.")
        return sign_on(str(payload.get("iss", "")), claims, token_claims=payload)
