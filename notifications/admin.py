"""Channels, rules and deliveries in the admin. Saves and deletes go through
``notifications.actions`` (permission, audit entry); a channel's secret values are shown as the
mask, which saved back keeps them."""

from django import forms
from django.contrib import admin, messages
from django.db import transaction

from audit.models import Source
from jobs.actions.jobs import Actor

from . import actions, channel_secrets, channels
from .models import RULE_EVENTS, Channel, Delivery, Rule


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


class ThroughActions(admin.ModelAdmin):
    """Adding, changing and deleting go through the actions ``acts`` (create, edit, delete), each
    of which checks the permission and writes the audit entry."""

    acts = ()

    def save_model(self, request, obj, form, change):
        create, edit, _ = self.acts
        (edit if change else create)(admin_actor(request), obj)

    def delete_model(self, request, obj):
        self.acts[2](admin_actor(request), obj)

    def delete_queryset(self, request, queryset):
        actor = admin_actor(request)
        with transaction.atomic():
            for obj in self.deleted(queryset):
                self.acts[2](actor, obj)

    def deleted(self, queryset):
        return queryset


@admin.register(Channel)
class ChannelAdmin(ThroughActions):
    acts = (actions.create_channel, actions.edit_channel, actions.delete_channel)  # before the admin's own actions
    form = ChannelForm
    list_display = ["name", "kind", "enabled", "owner", "group", "shared", "last_error", "disabled_reason"]
    list_filter = ["kind", "enabled", "shared"]
    search_fields = ["name"]
    actions = ["send_test"]
    readonly_fields = ["owner", "last_error", "disabled_reason", "created_at", "shown_config"]

    def get_fields(self, request, obj=None):
        # Who may only view a channel sees its configuration masked, not the stored form.
        config = "config" if self.has_change_permission(request, obj) or obj is None else "shown_config"
        return ["name", "kind", config, "enabled", "owner", "group", "shared", "last_error", "disabled_reason",
                "created_at"]

    def get_queryset(self, request):
        return actions.visible_channels(request.user)

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
class RuleAdmin(ThroughActions):
    form = RuleForm
    list_display = ["__str__", "channel", "scope", "enabled", "owner", "group", "paused_reason"]
    list_filter = ["enabled", "scope", "channel"]
    autocomplete_fields = ["job"]
    readonly_fields = ["owner", "paused_reason"]
    acts = (actions.create_rule, actions.edit_rule, actions.delete_rule)

    def get_queryset(self, request):
        return actions.visible_rules(request.user)

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
