from django import forms
from django.contrib import admin, messages

from .models import RULE_EVENTS, Channel, Delivery, Rule
from .sending import send_test_notification


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "last_error", "disabled_reason"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    actions = ["send_test"]

    @admin.action(description="Send a test notification", permissions=["change"])
    def send_test(self, request, queryset):
        for channel in queryset:
            sent, text = send_test_notification(channel)
            self.message_user(request, text, messages.SUCCESS if sent else messages.ERROR)


class RuleForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=RULE_EVENTS, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Rule
        fields = ["channel", "events", "scope", "tag", "job", "enabled"]


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    form = RuleForm
    list_display = ["__str__", "channel", "scope", "enabled"]
    list_filter = ["enabled", "scope", "channel"]
    autocomplete_fields = ["job"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "event", "channel", "job", "run", "status", "attempts", "last_error", "sent_at"]
    list_filter = ["status", "channel", "event"]
    search_fields = ["dedup_key", "job__name"]
    list_select_related = ["channel", "job", "run"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
