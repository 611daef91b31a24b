"""A job's versions on its page: the latest, each with what it changed, a diff of any two
(``?version=N&against=M``), and a restore button (POST, then back to the job's page)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from ..actions import versions as version_actions
from ..actions.errors import ActionError
from ..actions.permissions import visible_jobs
from ..actions.snapshot import diff
from ..models import JobVersion
from .common import actor, refused_is_forbidden

VERSIONS_ON_JOB_PAGE = 10


def _number(params, name):
    text = params.get(name, "")
    return int(text) if text.isdigit() and len(text) <= 9 else None


def context(job, params):
    """The job page's part: its latest versions, and the diff asked for (``compared``), or why not."""
    shown = list(job.versions.all()[:VERSIONS_ON_JOB_PAGE])
    for version in shown:
        version.shown_changes = version_actions.changes_of(version)
    found = {"versions": shown, "versions_more": job.version > len(shown)}
    number, against = _number(params, "version"), _number(params, "against")
    if number is None or against is None:
        return found
    pair = {v.number: v for v in JobVersion.objects.filter(job=job, number__in=[number, against])}
    if number not in pair or against not in pair:
        return {**found, "compare_error": f"The job has no version {number if number not in pair else against}."}
    return {**found, "compared": (against, number, diff(pair[against].values, pair[number].values))}


@login_required
@require_POST
@refused_is_forbidden
def restore(request, pk, number):
    job = get_object_or_404(visible_jobs(request.user), pk=pk)
    version = JobVersion.objects.filter(job=job, number=number).first() if number >= 1 else None
    if version is None:
        raise Http404(f"The job has no version {number}.")
    try:
        job, changed = version_actions.restore(actor(request), job, version)
    except ActionError as exc:
        messages.error(request, exc.message)
    else:
        if changed:
            messages.success(request, f"Restored version {number}: the job is now at version {job.version}.")
        else:
            messages.info(request, f"The job is already as version {number} made it; nothing changed.")
    return redirect("pages:job", pk=job.pk)
