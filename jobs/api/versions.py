"""The versions of a job or a workflow through the API (``VersionsViewSet``, with the ``History``
of either, ``jobs.actions.versions``): the list, one version (with a diff against another), and a
restore."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from .params import int_param


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(source="number")
    created_at = serializers.DateTimeField()
    author = serializers.CharField(source="author_name", help_text="Who saved it, as the audit trail names them.")
    changes = serializers.SerializerMethodField(help_text="{field: [before, after]} against the version before "
                                                          "(a job's private values by their keys only).")
    detail = serializers.CharField(help_text="What made it, when not an edit: \"restored version 3\", a jobs file.")

    def get_changes(self, version) -> dict:
        return self.context["history"].changes_of(version)


class VersionDetailSerializer(VersionSerializer):
    values = serializers.SerializerMethodField(help_text="What this version made it (a job's private values by "
                                                         "their keys only; secret values are never kept).")

    def get_values(self, version) -> dict:
        return self.context["history"].shown(version.values)


class VersionsViewSet:
    """The versions calls of a viewset whose objects are versioned; ``history`` says how."""

    history = None  # a jobs.actions.versions.History

    def version_of(self, versioned, number):
        """Its version ``number``; a 404 for 0 or one it does not have."""
        found = self.history.version_of(versioned, number)
        if found is None:
            raise NotFound(self.history.missing(number))
        return found

    def detail_of(self, versioned, number, against=None):
        """A version's answer; with ``against`` (another version's number), ``diff``: {field: [in that
        version, in this one]}."""
        version = self.version_of(versioned, number)
        data = VersionDetailSerializer(version, context={"history": self.history}).data
        if against is not None:
            data["against"] = against
            data["diff"] = self.history.diff(self.version_of(versioned, against).values, version.values)
        return data

    @extend_schema(request=None, responses=VersionSerializer(many=True),
                   description="Every saved change of it is a version (1, 2, ...), newest first: its number, when, "
                               "who, and what it changed against the version before.")
    @action(detail=True, methods=["get"])
    def versions(self, request, pk=None):
        page = self.paginate_queryset(self.get_object().versions.all())
        return self.get_paginated_response(VersionSerializer(page, many=True, context={"history": self.history}).data)

    @extend_schema(
        request=None, responses=VersionDetailSerializer,
        parameters=[OpenApiParameter("against", OpenApiTypes.INT, description="Another version's number: adds "
                                     "`diff`, {field: [in that version, in this one]}.")],
        description="One version: what it changed and what it made it. 404 for a version it does not have "
                    "(0 included).")
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<number>[0-9]{1,9})")
    def version(self, request, pk=None, number=None):
        versioned = self.get_object()
        against = int_param(request.query_params, "against") if "against" in request.query_params else None
        return Response(self.detail_of(versioned, int(number), against))

    @extend_schema(
        request=None, responses={201: VersionDetailSerializer, 200: VersionDetailSerializer},
        description="Make it what this version was: an edit, audited (\"restored version N\"), which is itself "
                    "the next version (201, that version). The owner, team, whether it is enabled (and a job's "
                    "secret values) stay as they are. 200 when it is already so (no version made); 404 for a "
                    "version it does not have (0 included); 400 when what the version was is no longer valid "
                    "(a job it names was deleted, a limit is no longer yours).")
    @action(detail=True, methods=["post"], url_path=r"versions/(?P<number>[0-9]{1,9})/restore")
    @transaction.atomic
    def restore(self, request, pk=None, number=None):
        versioned = self.get_object()
        versioned, changed = self.history.restore(self.actor, versioned, self.version_of(versioned, int(number)))
        data = self.detail_of(versioned, versioned.version) if versioned.version else {}
        return Response(data, status=status.HTTP_201_CREATED if changed else status.HTTP_200_OK)
