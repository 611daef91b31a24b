"""``GET, POST /api/limits/`` and ``GET, PATCH, PUT, DELETE /api/limits/<key or id>/``: limits shared
across jobs (``jobs.models.Limit``). Everyone logged in reads them (to see what their runs wait
for); staff change them (``jobs.actions.limits``, which writes the audit entry)."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound

from ..actions import limits as actions
from ..lifecycle import limits
from ..models import Job, Limit
from .views import ApiViewSet


class LimitSerializer(serializers.ModelSerializer):
    running = serializers.SerializerMethodField(help_text="Runs of its jobs running now.")
    waiting = serializers.SerializerMethodField(help_text="Runs of its jobs waiting for room.")
    jobs = serializers.SerializerMethodField(help_text="How many jobs name it (limit_key).")

    class Meta:
        model = Limit
        fields = ["id", "key", "max_running", "max_starts_per_minute", "description", "running", "waiting", "jobs",
                  "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"description": {"trim_whitespace": False}}

    @extend_schema_field(OpenApiTypes.INT)
    def get_running(self, limit):
        return limits.running_count(limit.key)

    @extend_schema_field(OpenApiTypes.INT)
    def get_waiting(self, limit):
        return limits.waiting(limit.key).count()

    @extend_schema_field(OpenApiTypes.INT)
    def get_jobs(self, limit):
        return Job.objects.filter(limit_key=limit.key).count()

    def save(self, **kwargs):
        raise NotImplementedError("A limit is saved by jobs.actions.limits, which checks who may and writes the "
                                  "audit entry: pass it the validated data.")


@extend_schema_view(
    list=extend_schema(description="Every limit, by key, with how many runs of its jobs run and wait now."),
    create=extend_schema(description="Define a limit (staff only)."),
    retrieve=extend_schema(description="One limit, by its key (or its id)."),
    partial_update=extend_schema(description="Change some fields (staff only). A key that jobs name cannot change."),
    update=extend_schema(description="Replace a limit's fields (staff only)."),
    destroy=extend_schema(description="Delete a limit (staff only); refused (409) while jobs name it."),
)
class LimitViewSet(ApiViewSet, viewsets.ModelViewSet):
    serializer_class = LimitSerializer
    queryset = Limit.objects.all()
    lookup_value_regex = "[^/]+"

    def get_object(self):
        """By key, or by id when no limit has that key."""
        value = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        if "\x00" in value:  # PostgreSQL text cannot hold NUL: a 500 if it reached the query
            raise NotFound("No limit has this key or id.")
        found = Limit.objects.filter(key=value).first()
        if found is None and value.isdigit() and len(value) < 19:
            found = Limit.objects.filter(pk=int(value)).first()
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
