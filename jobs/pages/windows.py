"""The maintenance windows' pages: the windows a user sees (theirs, their team's, the shared ones)
with what each is on now or next, and the form of a new one or of one they may change. Each change
goes through ``jobs.actions.windows`` (which writes the audit entry)."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.utils import timezone

from ..actions import windows as actions
from ..models import Window
from ..resources import WINDOWS
from . import owned
from .common import actor, page

SHOWN = 500


class ListField(forms.CharField):
    """A list typed as "a, b, c" (``kind``: of each item)."""

    def __init__(self, *args, kind=str, **kwargs):
        self.kind = kind
        super().__init__(*args, required=False, **kwargs)

    def prepare_value(self, value):
        return ", ".join(map(str, value)) if isinstance(value, list) else value

    def to_python(self, value):
        items = [item.strip() for item in (value or "").split(",") if item.strip()]
        try:
            return [self.kind(item) for item in items]
        except ValueError:
            raise ValidationError("Job ids are whole numbers, separated by commas.") from None


class WindowForm(owned.OwnedForm):
    jobs = ListField(kind=int, help_text="Ids of jobs it applies to, separated by commas.")
    tags = ListField(help_text="Tags whose jobs it applies to, separated by commas.")

    class Meta:
        model = Window
        fields = actions.EDITABLE
        widgets = {"description": forms.Textarea(attrs={"rows": 2}),
                   "starts_at": forms.DateTimeInput(attrs={"placeholder": "2026-12-01 02:00 (UTC)"}),
                   "ends_at": forms.DateTimeInput(attrs={"placeholder": "2026-12-01 04:00 (UTC)"})}


@login_required
def window_list(request):
    acting, now = actor(request), timezone.now()
    shown = list(actions.visible(request.user).select_related("group")[:SHOWN])
    for window in shown:
        window.span = window.next_span(now)
        window.on_now = window.span is not None and window.span[0] <= now
        window.may_edit = actions.may_edit(acting, window)
    return page(request, "pages/windows.html", {"windows": shown, "form": WindowForm(user=request.user)}, "windows")


window_edit, window_delete = owned.views_of(WINDOWS, WindowForm, "windows")
