"""The versions of a job or a workflow on its page (with its ``History``, ``jobs.actions.versions``):
the latest, each with what it changed, a diff of any two (``?version=N&against=M``), and a restore
button (POST, then back to its page). The table is ``pages/_versions.html``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from ..actions.errors import ActionError
from ..actions.permissions import visible_jobs
from ..actions.versions import JOBS
from .common import actor, refused_is_forbidden

VERSIONS_ON_A_PAGE = 10


def _number(params, name):
    text = params.get(name, "")
    return int(text) if text.isdigit() and len(text) <= 9 else None


def context(versioned, params, history, restore_url):
    """The page's part: its latest versions, and the diff asked for (``compared``), or why not.
    ``restore_url``: the name of the restore's URL (its pk and a version's number)."""
    shown = list(versioned.versions.all()[:VERSIONS_ON_A_PAGE])
    for version in shown:
        version.shown_changes = history.changes_of(version)
    found = {"versions": shown, "versions_more": versioned.version > len(shown), "versioned": versioned,
             "versioned_noun": history.noun, "version_restore_url": restore_url}
    number, against = _number(params, "version"), _number(params, "against")
    if number is None or against is None:
        return found
    pair = {v.number: v for v in versioned.versions.filter(number__in=[number, against])}
    if number not in pair or against not in pair:
        return {**found, "compare_error": history.missing(number if number not in pair else against)}
    return {**found, "compared": (against, number, history.diff(pair[against].values, pair[number].values))}


def restored(request, versioned, number, history):
    """Restore ``versioned``'s version ``number`` as the page's user, the outcome told as a message
    (a refusal for want of the right is a 403: ``refused_is_forbidden``)."""
    version = history.version_of(versioned, number)
    if version is None:
        raise Http404(history.missing(number))
    try:
        versioned, changed = history.restore(actor(request), versioned, version)
    except ActionError as exc:
        if exc.kind == ActionError.FORBIDDEN:
            raise
        messages.error(request, exc.message)
    else:
        if changed:
            messages.success(request, f"Restored version {number}: the {history.noun} is now at version "
                                      f"{versioned.version}.")
        else:
            messages.info(request, f"The {history.noun} is already as version {number} made it; nothing changed.")
    return versioned


@login_required
@require_POST
@refused_is_forbidden
def restore(request, pk, number):
    job = restored(request, get_object_or_404(visible_jobs(request.user), pk=pk), number, JOBS)
    return redirect("pages:job", pk=job.pk)
