"""``GET, POST /api/limits/`` and ``GET, PATCH, PUT, DELETE /api/limits/<key or id>/``: limits shared
across jobs (``jobs.models.Limit``). A user reads and names their own, their team's and the shared
ones (another's answer 404), and changes their own and their team's; staff any
(``jobs.actions.limits``, which writes the audit entry)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import NotFound

from ..actions import limits as actions
from ..actions import permissions
from ..models import Limit
from ..schemas.limits import LimitSerializer
from .views import ApiViewSet


@extend_schema_view(
    list=extend_schema(description="The limits you may name (yours, your teams', the shared ones), by key, with how "
                                   "many runs of their jobs run and wait now."),
    create=extend_schema(description="Define a limit: yours, and your team's when `group` is given. Only staff "
                                     "set `shared`."),
    retrieve=extend_schema(description="One limit, by its key (or its id)."),
    partial_update=extend_schema(description="Change some fields of a limit of yours or your team's (staff: any). "
                                             "A key that jobs name cannot change."),
    update=extend_schema(description="Replace a limit's fields (yours or your team's; staff: any)."),
    destroy=extend_schema(description="Delete a limit of yours or your team's (staff: any); refused (409) while "
                                      "jobs name it."),
)
class LimitViewSet(ApiViewSet, viewsets.ModelViewSet):
    serializer_class = LimitSerializer
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return permissions.owned_or_shared(Limit.objects.all(), self.request.user)

    def get_object(self):
        """By key, or by id when no limit has that key."""
        value = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        if "\x00" in value:  # PostgreSQL text cannot hold NUL: a 500 if it reached the query
            raise NotFound("No limit has this key or id.")
        found = self.get_queryset().filter(key=value).first()
        if found is None and value.isdigit() and len(value) < 19:
            found = self.get_queryset().filter(pk=int(value)).first()
        if found is None:
            raise NotFound("No limit has this key or id.")
        return found

    def perform_create(self, serializer):
        serializer.instance = actions.create_limit(self.actor, Limit(**serializer.validated_data))

    @transaction.atomic
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        serializer.instance = actions.edit_limit(self.actor, serializer.instance, dict(serializer.validated_data))

    def perform_destroy(self, instance):
        actions.delete_limit(self.actor, instance)
