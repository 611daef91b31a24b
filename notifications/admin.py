from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from .models import RULE_EVENTS, Channel, Delivery, Rule
from .transports import TransportError, get_transport


def test_delivery(channel):
    """An unsaved delivery that says hello, for the "Send a test notification" action."""
    now = timezone.now().isoformat()
    payload = {
        "event": "test",
        "job": {"id": None, "name": "(test)"},
        "run": {"id": None, "status": "test", "attempt": 1, "max_attempts": 1, "scheduled_for": now,
                "started_at": None, "finished_at": None, "worker": "", "error": "", "reason": ""},
        "details": {},
    }
    return Delivery(event="test", channel=channel, payload=payload, dedup_key="test")


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "enabled", "last_error", "disabled_reason"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name"]
    actions = ["send_test"]

    @admin.action(description="Send a test notification")
    def send_test(self, request, queryset):
        for channel in queryset:
            try:
                get_transport(channel.kind).send(channel, test_delivery(channel))
            except TransportError as exc:
                Channel.objects.filter(pk=channel.pk).update(last_error=exc.message)
                self.message_user(request, f"Could not send a test notification to {channel.name}: {exc.message}", messages.ERROR)
            else:
                Channel.objects.filter(pk=channel.pk).update(last_error="")
                self.message_user(request, f"Sent a test notification to {channel.name}.", messages.SUCCESS)


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
