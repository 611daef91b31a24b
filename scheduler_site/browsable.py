"""The browsable API (``/api/`` in a browser), with forms that work or none.

DRF's "HTML form" cannot edit the JSON fields (a job's arguments, environment, schedule object):
it prefilled them with ``null``, refused the schedule, and its unticked checkboxes made every new job
paused. So it is off. Staff keep the raw JSON form, prefilled with the model's defaults (the admin's);
everyone else is pointed to the pages, which have the forms for people."""

from django.urls import reverse
from django.utils.html import format_html
from rest_framework import serializers
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer


class Renderer(BrowsableAPIRenderer):
    def get_rendered_html_form(self, data, view, method, request):
        return None

    def get_raw_data_form(self, data, view, method, request):
        if not request.user.is_staff:
            return None
        form = super().get_raw_data_form(data, view, method, request)
        if form is not None and method == "POST":
            defaults = self.defaults(view)
            if defaults is not None:
                form.initial["_content"] = JSONRenderer().render(defaults, renderer_context={"indent": 4}).decode()
        return form

    @staticmethod
    def defaults(view):
        """A new object's fields as the model makes them (its defaults), the writable ones only."""
        serializer = view.get_serializer() if hasattr(view, "get_serializer") else None
        if not isinstance(serializer, serializers.ModelSerializer):
            return None
        try:
            shown = serializer.to_representation(serializer.Meta.model())
        except Exception:  # a field that cannot show an unsaved object: DRF's own prefill then
            return None
        return {name: value for name, value in shown.items()
                if name in serializer.fields and not serializer.fields[name].read_only}

    def get_context(self, data, accepted_media_type, renderer_context):
        context = super().get_context(data, accepted_media_type, renderer_context)
        request = renderer_context["request"]
        if not request.user.is_staff and request.method == "GET":
            context["description"] = format_html(
                '{}<p class="pages-note">To create or change jobs in a browser, use the '
                '<a href="{}">pages</a>; this API takes JSON (see <a href="{}">its documentation</a>).</p>',
                context["description"], reverse("pages:jobs"), reverse("api-docs"))
        return context
