"""A page's form over a resource of ``jobs.resources`` (channels, rules, workflows): the values the
form read, in the API's shape, are checked by the resource's serializer and saved by its actions, as
the API does (``jobs.api.resources``), so a page and the API take the same objects with the same
messages. A form only translates its fields into that shape and the errors back onto its fields."""

from rest_framework.settings import api_settings

from ..actions.jobs import ActionError
from .common import actor
from .job_forms import flat

OTHER = "__all__"  # the errors of no field of the form


def errors_of(errors):
    """{field: [messages]} of the serializer's or an action's errors; ``OTHER`` for those of no field."""
    found = {}
    for name, texts in errors.items():
        found.setdefault(OTHER if name == api_settings.NON_FIELD_ERRORS_KEY else name, []).extend(flat(texts))
    return found


def save(request, resource, data, instance=None):
    """Check ``data`` and create (``instance`` None) or change ``instance`` through the resource's
    actions: (the saved object, None), or (None, {field: [messages]}). An action refused as
    forbidden raises on (``refused_is_forbidden`` answers 403)."""
    acting = actor(request)
    serializer = resource.shape()(instance, data=data, partial=instance is not None,
                                  context={"request": request, "actor": acting})
    if not serializer.is_valid():
        return None, errors_of(serializer.errors)
    values = dict(serializer.validated_data)
    try:
        if instance is None:
            return resource.create(acting, resource.model(**values)), None
        return resource.edit(acting, instance, values), None
    except ActionError as exc:
        if exc.kind == ActionError.FORBIDDEN:
            raise
        return None, errors_of(exc.fields or {OTHER: [exc.message]})
