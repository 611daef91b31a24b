"""A job's versions through the API: the list, one version (with a diff against another), and a
restore (``jobs.actions.versions``)."""

from django.http import Http404
from rest_framework import serializers

from ..actions.snapshot import diff, shown
from ..actions.versions import changes_of
from ..models import JobVersion


class VersionSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="number")
    author = serializers.CharField(source="author_name", help_text="Who saved it, as the audit trail names them.")
    changes = serializers.SerializerMethodField(help_text="{field: [before, after]} against the version before "
                                                          "(private values by their keys only).")
    detail = serializers.CharField(help_text="What made it, when not an edit: \"restored version 3\", a jobs file.")

    class Meta:
        model = JobVersion
        fields = ["version", "created_at", "author", "changes", "detail"]
        read_only_fields = fields


    def get_changes(self, version) -> dict:
        return changes_of(version)


class VersionDetailSerializer(VersionSerializer):
    values = serializers.SerializerMethodField(help_text="The job as this version made it (private values by their "
                                                         "keys only; secret values are never kept).")

    class Meta(VersionSerializer.Meta):
        fields = [*VersionSerializer.Meta.fields, "values"]
        read_only_fields = fields

    def get_values(self, version) -> dict:
        return shown(version.values)


def version_of(job, number):
    """The job's version ``number`` (1, 2, ...); a 404 for 0 or one it does not have."""
    found = JobVersion.objects.filter(job=job, number=number).select_related(None).first() if number >= 1 else None
    if found is None:
        raise Http404(f"The job {job.name} has no version {number}.")
    return found


def detail_of(job, number, against=None):
    """A version's answer; with ``against`` (another version's number), ``diff``: {field: [in that
    version, in this one]}."""
    version = version_of(job, number)
    data = VersionDetailSerializer(version).data
    if against is not None:
        data["against"] = against
        data["diff"] = diff(version_of(job, against).values, version.values)
    return data
