from django.contrib import admin

from .models import Identity


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    """Read-only: identities are made by signing on. Deleting one makes its user a local account again
    (which a later sign-on of that subject will not take over)."""

    list_display = ("user", "subject", "issuer", "last_sign_on")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "managed_groups", "created_at", "last_sign_on")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
