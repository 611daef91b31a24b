"""The limits page: the limits a user may name (theirs, their team's, the shared ones), with how
many runs of their jobs run and wait now, and the names of the jobs naming each that the user can
see (others' are counted, not named). A user creates limits, and changes and deletes their own and
their team's here; staff any; through ``jobs.actions.limits`` (which writes the audit entry)."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from ..actions import limits as actions
from ..actions import permissions
from ..lifecycle import limits
from ..models import Job, Limit
from .common import actor, attempt, page, refused_is_forbidden
from .form_kit import from_form

SHOWN = 500


class LimitForm(forms.ModelForm):
    class Meta:
        model = Limit
        fields = actions.EDITABLE
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None and not permissions.sees_everything(user):
            self.fields["group"].queryset = Group.objects.filter(user=user)
            del self.fields["shared"]


@login_required
def limit_list(request):
    acting = actor(request)
    shown = list(actions.visible(request.user)[:SHOWN])
    for limit in shown:
        limit.running = limits.running_count(limit.key)
        limit.waiting = limits.waiting(limit.key).count()
        limit.job_names = actions.named_by(limit.key, count=10, user=request.user)
        limit.job_count = Job.objects.filter(limit_key=limit.key).count()
        limit.may_edit = actions.may_edit(acting, limit)
    return page(request, "pages/limits.html", {"limits": shown, **form_context(LimitForm(user=request.user))},
                "limits")


def form_context(form):
    return {"form": form, "fields": from_form(form), "other_errors": form.non_field_errors()}


@login_required
@refused_is_forbidden
def limit_edit(request, key=None):
    """The form of a new limit (``key`` None) or of the limit of ``key``."""
    acting = actor(request)
    limit = get_object_or_404(actions.visible(request.user), key=key) if key is not None else None
    if not actions.may_edit(acting, limit):
        raise PermissionDenied(actions.STAFF_ONLY)
    form = LimitForm(request.POST if request.method == "POST" else None, instance=limit, user=request.user)
    if request.method == "POST" and form.is_valid():
        saved, refused = attempt(actions.create_limit if limit is None else actions.edit_limit, acting, form.instance)
        if not refused:
            messages.success(request, f"Limit {saved.key} saved.")
            return redirect("pages:limits")
        form.add_error(None, refused.message)
    return page(request, "pages/limit_form.html", {**form_context(form), "limit": limit}, "limits")


@login_required
@require_POST
@refused_is_forbidden
def limit_delete(request, key):
    limit = get_object_or_404(actions.visible(request.user), key=key)
    _, refused = attempt(actions.delete_limit, actor(request), limit)
    if refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, f"Limit {key} deleted.")
    return redirect("pages:limits")
