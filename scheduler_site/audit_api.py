"""``GET /api/audit/``: the audit trail, newest first, each user seeing the entries of what they may
see: the jobs, workflows, channels, limits and calendars they can see, their teams' quotas, and their
own logins, account changes and tokens. Staff see all. It lives here, above the apps, because what a
user may see of it is the rules of every app together."""

from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets

from audit import trail
from audit.models import Action, AuditEntry, Source, Subject
from jobs.actions import calendars, limits
from jobs.actions.permissions import sees_everything, visible_jobs
from jobs.api.params import choice_param, datetime_param, text_param
from jobs.api.views import ApiViewSet
from notifications.actions import visible_channels
from workflows.permissions import visible_workflows

PERSONAL = (Subject.USER, Subject.TOKEN)  # entries named by the user they are about


def visible_entries(user):
    if sees_everything(user):
        return AuditEntry.objects.all()
    return AuditEntry.objects.filter(
        Q(job__in=visible_jobs(user))
        | Q(subject=Subject.WORKFLOW, job_name__in=visible_workflows(user).values("name"))
        | Q(subject=Subject.CHANNEL, job_name__in=visible_channels(user).values("name"))
        | Q(subject=Subject.LIMIT, job_name__in=limits.visible(user).values("key"))
        | Q(subject=Subject.CALENDAR, job_name__in=calendars.visible(user).values("name"))
        | Q(subject=Subject.QUOTA, job_name__in=user.groups.values("name"))
        | Q(subject__in=PERSONAL, job_name=user.get_username()))


class AuditEntrySerializer(serializers.ModelSerializer):
    name = serializers.CharField(source="job_name", help_text="What the entry is about, by name (see subject).")
    actor = serializers.SerializerMethodField(help_text="Who acted (a user name, 'system', or on the command "
                                                        "line the OS user, shown to staff only).")
    address = serializers.SerializerMethodField(help_text="The client's address (staff only; else empty).")

    class Meta:
        model = AuditEntry
        fields = ("id", "created_at", "subject", "name", "job", "action", "actor", "source", "address", "changes",
                  "detail", "hash")

    def _staff(self):
        return sees_everything(self.context["request"].user)

    def get_actor(self, entry) -> str:
        return entry.actor_name if self._staff() else trail.shown_actor(entry)

    def get_address(self, entry) -> str:
        return entry.remote_addr if self._staff() else ""


@extend_schema_view(list=extend_schema(
    summary="The audit trail, newest first",
    description="Entries about the jobs and workflows you can see, and your own logins, account changes and "
                "API tokens (staff: every entry).",
    parameters=[
        OpenApiParameter("subject", OpenApiTypes.STR, enum=Subject.values),
        OpenApiParameter("action", OpenApiTypes.STR, enum=Action.values),
        OpenApiParameter("actor", OpenApiTypes.STR, description="Who acted: a user name, or 'system'."),
        OpenApiParameter("since", OpenApiTypes.DATETIME, description="Created at or after (ISO 8601)."),
    ]))
class AuditViewSet(ApiViewSet, mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = AuditEntrySerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AuditEntry.objects.none()
        found = visible_entries(self.request.user).order_by("-created_at", "-id")
        params = self.request.query_params
        if "subject" in params:
            found = found.filter(subject=choice_param(params, "subject", Subject.values))
        if "action" in params:
            found = found.filter(action=choice_param(params, "action", Action.values))
        if "actor" in params:
            # By user name, or by the name shown; a command line's OS user is not searchable.
            actor = text_param(params, "actor")
            found = found.filter(Q(actor__username=actor) | (Q(actor_name=actor) & ~Q(source=Source.CLI)))
        if "since" in params:
            found = found.filter(created_at__gte=datetime_param(params, "since"))
        return found
