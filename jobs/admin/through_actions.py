"""An admin whose saves and deletes go through ``jobs.actions`` functions, which check who may and
write the audit entry: ``create``, ``edit`` and ``delete``, each called with (actor, object)."""

from django.db import transaction

from audit.models import Source

from ..actions.jobs import Actor


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
