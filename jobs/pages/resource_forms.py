"""A page's form over a resource of ``jobs.resources`` (channels, rules, workflows): the values the
form read, in the API's shape, are checked by the resource's serializer and saved by its actions, as
the API does (``jobs.api.resources``), so a page and the API take the same objects with the same
messages. A form only translates its fields into that shape and the errors back onto its fields."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.shortcuts import redirect
from django.utils.text import capfirst
from rest_framework.settings import api_settings

from ..actions.jobs import ActionError
from ..resources import Resource
from .common import actor, attempt
from .job_forms import flat

OTHER = "__all__"  # the errors of no field of the form


def errors_of(errors):
    """{field: [messages]} of the serializer's or an action's errors; ``OTHER`` for those of no field."""
    found = {}
    for name, texts in errors.items():
        found.setdefault(OTHER if name == api_settings.NON_FIELD_ERRORS_KEY else name, []).extend(flat(texts))
    return found


def checked(request, resource, data, instance=None):
    """(the serializer's validated values, None) of ``data``, or (None, {field: [messages]})."""
    serializer = resource.shape()(instance, data=data, partial=instance is not None,
                                  context={"request": request, "actor": actor(request)})
    if not serializer.is_valid():
        return None, errors_of(serializer.errors)
    return dict(serializer.validated_data), None


def by_resource(resource):
    """Saving validated values as the generic API does: ``resource.create`` or ``resource.edit``."""
    def apply(acting, values, instance=None):
        if instance is None:
            return resource.create(acting, resource.model(**values))
        return resource.edit(acting, instance, values)
    return apply


def save(request, resource, data, instance=None, apply=None):
    """Check ``data`` and create (``instance`` None) or change ``instance`` through the resource's
    actions (``apply(actor, values, instance)``: the resource's create and edit unless given): (the
    saved object, None), or (None, {field: [messages]}). An action refused as forbidden raises on
    (``refused_is_forbidden`` answers 403)."""
    values, errors = checked(request, resource, data, instance)
    if errors:
        return None, errors
    try:
        return (apply or by_resource(resource))(actor(request), values, instance), None
    except ActionError as exc:
        if exc.kind == ActionError.FORBIDDEN:
            raise
        return None, errors_of(exc.fields or {OTHER: [exc.message]})


@dataclass(frozen=True)
class ResourceForm:
    """A resource's form: ``from_post(post)`` its values as typed; ``to_api(values, instance)`` the
    API's body of them and {field: [messages]} of the values that are no part of one (a line that is
    not an edge); ``answer(request, values, errors, instance)`` the form drawn; ``title(obj)`` what
    messages call an object; ``values_of(obj)`` the form's values of a stored one; ``apply``: as
    ``save``'s."""

    resource: Resource
    from_post: Callable
    to_api: Callable
    answer: Callable
    title: Callable
    values_of: Callable
    apply: Callable | None = None


def form_view(request, form, instance=None, done="", initial=None):
    """The form of ``instance`` (None: a new one, with the values ``initial``), or its POST saved."""
    if request.method == "POST":
        return submitted(request, form, instance, done)
    return form.answer(request, initial if instance is None else form.values_of(instance), {}, instance)


def submitted(request, form, instance=None, done=""):
    """A POST of a resource's form: saved, it says so and redirects to ``done`` (or ``done(saved)``);
    else the form again with every error, and the values as typed."""
    values = form.from_post(request.POST)
    data, own = form.to_api(values, instance)
    if own:  # the rest is checked too, so that every message is shown at once
        _, errors = checked(request, form.resource, {k: v for k, v in data.items() if k not in own}, instance)
        saved, errors = None, {**(errors or {}), **own}
    else:
        saved, errors = save(request, form.resource, data, instance, form.apply)
    if saved is None:
        if instance is not None:
            instance.refresh_from_db()  # the page shows what is stored beside the values refused
        return form.answer(request, values, errors, instance)
    messages.success(request, f"{capfirst(form.resource.noun)} {form.title(saved)} is "
                              f"{'created' if instance is None else 'saved'}.")
    return redirect(done(saved) if callable(done) else done)


def deleted(request, resource, instance, title, done, back):
    """Delete ``instance`` (called ``title``) through the resource's action and go to ``done``; refused,
    back to ``back`` with the reason."""
    _, refused = attempt(resource.delete, actor(request), instance)
    if refused:
        messages.error(request, refused.message)
        return redirect(back)
    messages.success(request, f"{capfirst(resource.noun)} {title} is deleted.")
    return redirect(done)
