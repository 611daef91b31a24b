"""Single sign-on through OpenID Connect (mozilla-django-oidc), on when ``OIDC_RP_CLIENT_ID`` is set.

A person signing on for the first time gets an account made from the provider's claims, tied to the
provider's subject (``Identity``); their teams (Django groups) follow the groups claim at every
sign-on. Local accounts (user name and password) keep working beside it.
"""
