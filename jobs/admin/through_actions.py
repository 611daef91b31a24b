"""An admin whose saves and deletes go through ``jobs.actions`` functions, which check who may and
write the audit entry: ``create``, ``edit`` and ``delete``, each called with (actor, object); and
the admin of a resource declared once (``jobs.resources.Resource``): ``ResourceAdmin``."""

from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse

from audit.models import Source

from ..actions.jobs import ActionError, Actor


def refused_as_message(model_admin, request, view, *args, to=None, **kwargs):
    """Run an admin view; an action it refused comes back to the list (or ``to``) as an error
    message, with nothing changed (the admin's views are atomic)."""
    try:
        return view(*args, **kwargs)
    except ActionError as exc:
        model_admin.message_user(request, exc.message, messages.ERROR)
        opts = model_admin.model._meta
        return HttpResponseRedirect(to or reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))


class ThroughActions:
    create = edit = delete = None  # staticmethod(fn(actor, obj)) of the admin's record

    def save_model(self, request, obj, form, change):
        # The form has set the fields on ``obj`` already.
        (self.edit if change else self.create)(Actor.of_request(request, Source.ADMIN), obj)

    def delete_model(self, request, obj):
        self.delete(Actor.of_request(request, Source.ADMIN), obj)

    def delete_queryset(self, request, queryset):
        actor = Actor.of_request(request, Source.ADMIN)
        with transaction.atomic():
            for obj in self.deleted(queryset):
                self.delete(actor, obj)

    def deleted(self, queryset):
        """The objects of a bulk delete, as the delete action needs them."""
        return queryset


class ResourceAdmin(ThroughActions, admin.ModelAdmin):
    """The admin of ``resource``: its list columns, what its ``visible`` gives the user, every save
    and delete one of its actions; a refused one comes back as a message."""

    resource = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = cls.resource
        if declared is None:
            return
        cls.create, cls.edit, cls.delete = map(staticmethod, (declared.create, declared.edit, declared.delete))
        cls.list_display = cls.__dict__.get("list_display", declared.admin_list)
        cls.search_fields = cls.__dict__.get("search_fields", declared.admin_search)
        if "readonly_fields" not in cls.__dict__ and any(f.name == "owner" for f in declared.model._meta.fields):
            cls.readonly_fields = ("owner",)

    def get_queryset(self, request):
        return self.resource.visible(request.user)

    def after_refused_delete(self, object_id):
        """Where a refused delete goes back to (None: the list)."""
        return None

    def changeform_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changeform_view, request, *args, **kwargs)

    def delete_view(self, request, object_id, extra_context=None):
        return refused_as_message(self, request, super().delete_view, request, object_id, extra_context,
                                  to=self.after_refused_delete(object_id))

    def changelist_view(self, request, *args, **kwargs):
        return refused_as_message(self, request, super().changelist_view, request, *args, **kwargs)


def register(resource, **options):
    """Register the admin of ``resource`` (with ``options``: the ModelAdmin's attributes)."""
    admin.site.register(resource.model, type(f"{resource.model.__name__}Admin", (ResourceAdmin,),
                                             {"resource": resource, "__module__": __name__, **options}))
