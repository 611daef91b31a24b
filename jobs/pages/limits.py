"""The limits page: the limits a user may name (theirs, their team's, the shared ones), with how
many runs of their jobs run and wait now, and the names of the jobs naming each that the user can
see (others' are counted, not named). A user creates limits, and changes and deletes their own and
their team's here; staff any; through ``jobs.actions.limits`` (which writes the audit entry)."""

from django import forms
from django.contrib.auth.decorators import login_required

from ..actions import limits as actions
from ..lifecycle import limits
from ..models import Job, Limit
from ..resources import LIMITS
from . import owned
from .common import actor, page

SHOWN = 500


class LimitForm(owned.OwnedForm):
    class Meta:
        model = Limit
        fields = actions.EDITABLE
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


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
    return page(request, "pages/limits.html", {"limits": shown, **owned.form_context(LimitForm(user=request.user))},
                "limits")




limit_edit, limit_delete = owned.views_of(LIMITS, LimitForm, "limits")
