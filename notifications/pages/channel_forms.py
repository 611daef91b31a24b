"""The channel form of the pages: make, change and delete a channel of any kind, through the API's
serializer and ``notifications.actions`` (``jobs.pages.resource_forms``).

A kind's fields are the keys of its ``config_example`` (its package under ``notifications/channels/``):
a list is rows of values, a secret key (``secret_fields``) a password input that never shows what is
stored; left blank, the stored value is kept (the API's mask is sent for it)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST

from jobs.actions.jobs import ActionError
from jobs.actions.permissions import sees_everything
from jobs.pages.common import actor, page, refused_is_forbidden
from jobs.pages.form_kit import NONE, FormField
from jobs.pages.job_forms import group_choices
from jobs.pages.resource_forms import OTHER, ResourceForm, deleted, form_view

from .. import actions, channel_secrets, channels
from ..resources import CHANNELS
from .views import actor_allowed

STORED = "A value is stored: it is never shown. Leave this blank to keep it, or type a new one."


def config_field(kind, key):
    """The form's name of a kind's config key ("slack.url": two kinds may both have a url)."""
    return f"{kind}.{key}"


def is_list(spec, key):
    return isinstance(spec.config_example[key], list)


def from_channel(channel):
    values = {"name": channel.name, "kind": channel.kind, "enabled": channel.enabled,
              "group": channel.group.name if channel.group_id else "", "shared": channel.shared}
    spec = channels.get(channel.kind)
    for key in spec.config_example if spec else ():
        value = (channel.config or {}).get(key)
        if key in spec.secret_fields:
            value = ""  # write-only
        elif is_list(spec, key):
            value = [str(item) for item in value or []]
        values[config_field(channel.kind, key)] = "" if value is None else value
    return values


def from_post(post):
    values = {"name": post.get("name", ""), "kind": post.get("kind", ""), "enabled": "enabled" in post,
              "group": post.get("group", ""), "shared": "shared" in post}
    for spec in channels.kinds().values():
        for key in spec.config_example:
            name = config_field(spec.name, key)
            values[name] = ([item for item in post.getlist(f"{name}-value") if item.strip()] if is_list(spec, key)
                            else post.get(name, ""))
    return values


def to_api(values, channel=None):
    """(the API's body of a channel from the form's values, no errors); a blank secret of a stored channel of the
    same kind is the mask (keep it)."""
    kind = values["kind"]
    spec = channels.get(kind)
    stored = (channel.config or {}) if channel is not None and channel.kind == kind else {}
    config = {}
    for key in spec.config_example if spec else ():
        value = values.get(config_field(kind, key), "")
        if key in spec.secret_fields and not value and stored.get(key):
            config[key] = channel_secrets.MASK
        elif value != "":
            config[key] = value
    return {"name": values["name"], "kind": kind, "config": config, "enabled": values["enabled"],
            "group": values["group"] or None, "shared": values["shared"]}, {}


def kind_fields(spec, values, channel):
    stored = (channel.config or {}) if channel is not None and channel.kind == spec.name else {}
    found = []
    for key, example in spec.config_example.items():
        name = config_field(spec.name, key)
        if key in spec.secret_fields:
            found.append(FormField(name, capfirst(key), "secret", "",
                                   STORED if stored.get(key) else f"Secret: stored encrypted, never shown. {example}"))
        elif is_list(spec, key):
            found.append(FormField(name, capfirst(key), "list", values.get(name) or [],
                                   f"One a row, e.g. {', '.join(example)}."))
        else:
            found.append(FormField(name, capfirst(key), "text", values.get(name, ""),
                                   "Optional." if example == "optional" else f"e.g. {example}"))
    return found


def form_context(request, values, errors, channel=None):
    kind_choices = channels.choices()
    fields = [FormField("name", "Name", "text", values["name"], errors=errors.get("name", [])),
              FormField("kind", "Kind", "select", values["kind"], errors=errors.get("kind", []),
                        choices=kind_choices),
              FormField("enabled", "Enabled", "checkbox", values["enabled"], errors=errors.get("enabled", [])),
              FormField("group", "Group", "select", values["group"], "A group of yours whose members may also use "
                        "and change the channel.", errors.get("group", []),
                        choices=[("", NONE), *group_choices(request.user, values["group"])])]
    if sees_everything(request.user):
        fields.append(FormField("shared", "Shared: everyone may point their rules at it", "checkbox",
                                values["shared"], errors=errors.get("shared", [])))
    shown = {f.name for f in fields} | {"config"}
    return {"channel": channel, "fields": fields,
            "kinds": [(spec.name, spec.label, kind_fields(spec, values, channel)) for spec in channels.kinds().values()],
            "config_errors": errors.get("config", []),
            "other_errors": [text for name, texts in errors.items() if name not in shown or name == OTHER
                             for text in texts],
            "may_test": channel is not None and actions.may(actor(request), "change")}


def editable_channel(request, pk):
    """A channel the user sees (404 otherwise) and may change (403 otherwise)."""
    acting = actor_allowed(request, "view")
    channel = get_object_or_404(actions.visible_channels(request.user).select_related("group"), pk=pk)
    actions.check(acting, "change")
    if not actions.may_change_channel(acting, channel):
        raise ActionError(actions.SHARED_CHANNEL, ActionError.FORBIDDEN)
    return channel


def answer(request, values, errors, channel=None):
    response = page(request, "pages/channel_form.html", form_context(request, values, errors, channel), "channels")
    response.status_code = 400 if errors else 200
    return response


FORM = ResourceForm(CHANNELS, from_post, to_api, answer, lambda channel: channel.name, from_channel)


@login_required
@refused_is_forbidden
def channel_new(request):
    actions.check(actor_allowed(request, "view"), "add")
    return form_view(request, FORM, done=reverse("notification-pages:channels"), initial={
        "name": "", "kind": next(iter(channels.kinds()), ""), "enabled": True, "group": "", "shared": False})


@login_required
@refused_is_forbidden
def channel_edit(request, pk):
    return form_view(request, FORM, editable_channel(request, pk), reverse("notification-pages:channels"))


@login_required
@require_POST
@refused_is_forbidden
def channel_delete(request, pk):
    channel = editable_channel(request, pk)
    return deleted(request, CHANNELS, channel, f"{channel.name} (with its rules)",
                   reverse("notification-pages:channels"), reverse("notification-pages:channel-edit", args=[pk]))
