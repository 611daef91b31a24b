"""The signed-in user's API tokens: listed (prefix, made, expires), made (the key shown once) and
revoked (jobs.actions.tokens, with their audit entries)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from audit.models import Source

from ..access import tokens as access
from ..actions import tokens
from ..actions.jobs import Actor
from .common import page


@login_required
def token_list(request, new_key=None):
    return page(request, "pages/tokens.html", {"tokens": access.of_user(request.user), "new_key": new_key},
                "tokens")


@login_required
@require_POST
def token_create(request):
    # The key is in this answer only: it is never stored (nor kept in the session to show later).
    try:
        _, key = tokens.create(Actor.of_request(request, Source.PAGE), request.user)
    except tokens.TooManyTokens as refused:
        messages.error(request, str(refused))
        return redirect("pages:tokens")
    return token_list(request, new_key=key)


@login_required
@require_POST
def token_revoke(request, prefix):
    if tokens.revoke(Actor.of_request(request, Source.PAGE), prefix, request.user):
        messages.success(request, f"Token {prefix}… revoked: it is refused from now on.")
    else:
        messages.error(request, f"You have no token {prefix}….")
    return redirect("pages:tokens")
