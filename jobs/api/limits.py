"""``GET, POST /api/limits/`` and ``GET, PATCH, PUT, DELETE /api/limits/<key or id>/``: limits shared
across jobs (``jobs.models.Limit``). A user reads and names their own, their team's and the shared
ones (another's answer 404), and changes their own and their team's; staff any
(``jobs.actions.limits``, which writes the audit entry)."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound

from ..actions import limits as actions
from ..actions import permissions
from ..lifecycle import limits
from ..models import Job, Limit
from .serializers import OwnedSerializer
from .views import ApiViewSet


class LimitSerializer(OwnedSerializer):
    running = serializers.SerializerMethodField(help_text="Runs of its jobs running now.")
    waiting = serializers.SerializerMethodField(help_text="Runs of its jobs waiting for room.")
    jobs = serializers.SerializerMethodField(help_text="How many jobs name it (limit_key), yours or not.")
    job_names = serializers.SerializerMethodField(help_text="The names of (up to 10 of) the jobs naming it that "
                                                            "you can see.")

    class Meta:
        model = Limit
        fields = ["id", "key", "max_running", "max_starts_per_minute", "description", "owner", "group", "shared",
                  "running", "waiting", "jobs", "job_names", "created_at", "updated_at"]
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

    @extend_schema_field({"type": "array", "items": {"type": "string"}})
    def get_job_names(self, limit):
        request = self.context.get("request")
        return actions.named_by(limit.key, count=10, user=getattr(request, "user", None))

    def save(self, **kwargs):
        raise NotImplementedError("A limit is saved by jobs.actions.limits, which checks who may and writes the "
                                  "audit entry: pass it the validated data.")


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
