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

NEW_KEY = "new_token_key"


@login_required
def token_list(request):
    # A new key is shown once: the session holds it from the POST to the page it redirects to.
    new_key = request.session.pop(NEW_KEY, None)
    return page(request, "pages/tokens.html", {"tokens": access.of_user(request.user), "new_key": new_key},
                "tokens")


@login_required
@require_POST
def token_create(request):
    # A redirect after the POST, so that reloading the page makes no second token. The key itself is
    # never stored (only its hash), and the session keeps it only until the page shows it.
    try:
        _, key = tokens.create(Actor.of_request(request, Source.PAGE), request.user)
    except tokens.TooManyTokens as refused:
        messages.error(request, str(refused))
        return redirect("pages:tokens")
    request.session[NEW_KEY] = key
    return redirect("pages:tokens")


@login_required
@require_POST
def token_revoke(request, prefix):
    if tokens.revoke(Actor.of_request(request, Source.PAGE), prefix, request.user):
        messages.success(request, f"Token {prefix}… revoked: it is refused from now on.")
    else:
        messages.error(request, f"You have no token {prefix}….")
    return redirect("pages:tokens")
