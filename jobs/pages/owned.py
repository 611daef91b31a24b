"""The form page and the delete of what a user owns and may share with a team, whose list page
lists them (limits, maintenance windows): who may change which is the resource's (``jobs.resources``)
``may_edit``, every save and delete one of its actions (which writes the audit entry); a refusal is
said on the form, field by field."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from ..actions import permissions
from .common import actor, attempt, page, refused_is_forbidden
from .form_kit import from_form


class OwnedForm(forms.ModelForm):
    """A form of what a user owns: its group one of theirs; ``shared`` for staff only."""

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None and not permissions.sees_everything(user):
            self.fields["group"].queryset = Group.objects.filter(user=user)
            del self.fields["shared"]


def views_of(resource, form_class, section):
    """(the form view, the delete view) of ``resource``, whose list is the page named ``section``;
    each takes the one it is about by its URL's one keyword (none: a new one)."""

    @login_required
    @refused_is_forbidden
    def edit(request, **ref):
        return edit_page(request, resource, form_class, section, next(iter(ref.values()), None))

    @login_required
    @require_POST
    @refused_is_forbidden
    def delete(request, **ref):
        return delete_page(request, resource, section, next(iter(ref.values())))

    return edit, delete


def edit_page(request, resource, form_class, section, ref=None):
    """The form of a new one (``ref`` None) or of the one named ``ref`` (its ``name_field``)."""
    acting, field = actor(request), resource.name_field
    found = get_object_or_404(resource.visible(request.user), **{field: ref}) if ref is not None else None
    if not resource.may_edit(acting, found):
        raise PermissionDenied(resource.refused)
    form = form_class(request.POST if request.method == "POST" else None, instance=found, user=request.user)
    if request.method == "POST" and form.is_valid():
        saved, refused = attempt(resource.create if found is None else resource.edit, acting, form.instance)
        if not refused:
            messages.success(request, f"{resource.noun.capitalize()} {getattr(saved, field)} saved.")
            return redirect(f"pages:{section}")
        for name, texts in refused.fields.items():
            form.add_error(name if name in form.fields else None, texts)
    return page(request, "pages/owned_form.html", {
        **form_context(form), "noun": resource.noun, "name": getattr(found, field, None), "list_url": f"pages:{section}",
        "delete_url": f"pages:{resource.noun}-delete"}, section)


def delete_page(request, resource, section, ref):
    found = get_object_or_404(resource.visible(request.user), **{resource.name_field: ref})
    _, refused = attempt(resource.delete, actor(request), found)
    if refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, f"{resource.noun.capitalize()} {ref} deleted.")
    return redirect(f"pages:{section}")


def form_context(form):
    """What the form kit (pages/_form_field.html) draws of a Django form."""
    return {"form": form, "fields": from_form(form), "other_errors": form.non_field_errors()}
