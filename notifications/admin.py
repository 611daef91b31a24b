"""Channels, rules and deliveries in the admin. Channels and rules are declared once
(``notifications.resources``): their saves and deletes go through ``notifications.actions``
(permission, audit entry); a channel's secret values are shown as the mask, which saved back keeps
them."""

from django import forms
from django.contrib import admin, messages

from audit.models import Source
from jobs.actions.jobs import Actor
from jobs.admin.through_actions import ResourceAdmin

from . import actions, channel_secrets, channels
from .models import RULE_EVENTS, Channel, Delivery, Rule
from .resources import CHANNELS, RULES


def admin_actor(request):
    return Actor.of_request(request, Source.ADMIN)


class ChannelForm(forms.ModelForm):
    class Meta:
        model = Channel
        fields = ["name", "kind", "config", "enabled", "group", "shared"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "config" in self.fields:  # not for who may only view the channel (ChannelAdmin.get_fields)
            self.fields["config"].help_text = (
                f"{channels.config_help()}. Secret values ({channels.secrets_help()}) are shown as "
                f'"{channel_secrets.MASK}": leave it to keep the stored value, or give a new one.')
            self.initial["config"] = channel_secrets.masked(self.instance.kind, self.instance.config)

    def clean(self):
        cleaned = super().clean()
        if "config" not in self.fields:
            return cleaned
        stored = Channel.objects.filter(pk=self.instance.pk).values_list("config", flat=True).first() or {}
        config, unknown = channel_secrets.kept(cleaned.get("kind"), cleaned.get("config"), stored)
        if unknown:
            self.add_error("config", [f"{key}: there is no stored value to keep; give the value itself."
                                      for key in unknown])
        elif self.instance.pk and (refused := channel_secrets.moved(
                self.instance.kind, stored, cleaned.get("kind"), config)):
            self.add_error("config", refused)
        cleaned["config"] = config
        return cleaned


@admin.register(Channel)
class ChannelAdmin(ResourceAdmin):
    resource = CHANNELS
    form = ChannelForm
    list_filter = ["kind", "enabled", "shared"]
    actions = ["send_test"]
    readonly_fields = ["owner", "last_error", "disabled_reason", "created_at", "shown_config"]

    def get_fields(self, request, obj=None):
        # Who may only view a channel sees its configuration masked, not the stored form.
        config = "config" if self.has_change_permission(request, obj) or obj is None else "shown_config"
        return ["name", "kind", config, "enabled", "owner", "group", "shared", "last_error", "disabled_reason",
                "created_at"]

    @admin.display(description="config")
    def shown_config(self, channel):
        return channel_secrets.masked(channel.kind, channel.config)

    @admin.action(description="Send a test notification", permissions=["change"])
    def send_test(self, request, queryset):
        for channel in queryset:
            sent, text = actions.send_test(admin_actor(request), channel)
            self.message_user(request, text, messages.SUCCESS if sent else messages.ERROR)


class RuleForm(forms.ModelForm):
    events = forms.MultipleChoiceField(choices=RULE_EVENTS, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Rule
        fields = ["channel", "events", "scope", "tag", "job", "enabled", "group"]


@admin.register(Rule)
class RuleAdmin(ResourceAdmin):
    resource = RULES
    form = RuleForm
    list_filter = ["enabled", "scope", "channel"]
    autocomplete_fields = ["job"]
    readonly_fields = ["owner", "paused_reason"]

    def deleted(self, queryset):
        return queryset.select_related("channel", "job")


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
