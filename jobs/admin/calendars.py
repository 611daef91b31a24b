"""The admin's calendars (``jobs.resources.CALENDARS``): the dates edited as lines ("2026-12-24
Christmas Eve"), every save and delete through ``jobs.actions.calendars`` (who may, audited)."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.urls import reverse

from audit.models import Source

from ..actions.jobs import Actor
from ..definitions.calendars import jobs_using
from ..models import Calendar
from ..models.calendar import dates_from_text, dates_text, normalised_dates
from ..resources import CALENDARS
from .through_actions import ResourceAdmin


class CalendarAdminForm(forms.ModelForm):
    dates = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 15, "cols": 60}),
                            help_text='One date a line, with an optional label: "2026-12-24 Christmas Eve".')

    class Meta:
        model = Calendar
        fields = ["name", "description", "country", "subdivision", "dates", "group", "shared"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial["dates"] = dates_text(self.instance.dates or [])

    def clean_name(self):
        name = self.cleaned_data.get("name")
        if self.instance.pk and name != self.instance.name and jobs_using(self.instance.name):
            raise ValidationError("Jobs name this calendar: it cannot be renamed. Make a new calendar instead.")
        return name

    def clean_dates(self):
        try:
            return normalised_dates(dates_from_text(self.cleaned_data.get("dates") or ""))
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["dates"]) from None


@admin.register(CALENDARS.model)
class CalendarAdmin(ResourceAdmin):
    resource = CALENDARS
    form = CalendarAdminForm

    @admin.display(description="typed-in dates")
    def date_count(self, calendar):
        return len(calendar.dates or [])

    def has_add_permission(self, request):
        return CALENDARS.may_edit(Actor.of_request(request, Source.ADMIN))

    def has_change_permission(self, request, obj=None):
        return CALENDARS.may_edit(Actor.of_request(request, Source.ADMIN), obj)

    def has_delete_permission(self, request, obj=None):
        return self.has_change_permission(request, obj)

    def after_refused_delete(self, object_id):  # used by jobs: said on the calendar's page
        return reverse("admin:jobs_calendar_change", args=[object_id])
