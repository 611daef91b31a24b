"""The audit trail in the admin: read only, searchable by job and user."""

from django.contrib import admin

from .models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "subject", "job_name", "action", "actor_name", "source", "remote_addr", "changed_fields")
    list_filter = ("subject", "action", "source")
    search_fields = ("job_name", "actor_name", "remote_addr")
    date_hierarchy = "created_at"
    fields = ("created_at", "subject", "job", "job_name", "action", "actor", "actor_name", "source", "remote_addr", "run",
              "detail", "changes", "prev_hash", "hash")
    readonly_fields = fields
    list_select_related = ("job",)

    @admin.display(description="changed")
    def changed_fields(self, entry):
        return ", ".join(entry.changes) if entry.changes else "-"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
