"""The calendars' pages: the list of those a user may name (theirs, their team's, the shared ones),
and one calendar with its dates (and, for who may change it, its form, an ICS upload and delete).
Each change goes through ``jobs.actions.calendars``."""

from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import Http404, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import redirect
from django.utils.text import capfirst
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..actions import calendars as actions
from ..models import Calendar
from ..models.calendar import dates_from_text, dates_text
from .common import actor, attempt, counted, page, refused_is_forbidden
from .form_kit import FormField

FIELDS = ("name", "description", "country", "subdivision")
HELP = {
    "country": "A country code (DE): its public holidays of every year (from the holidays package) are dates of "
               "the calendar too.",
    "subdivision": "A region of the country (BE for Berlin), for its own holidays as well.",
    "dates": "One a line: a date and its label, such as 2026-12-24 Christmas Eve.",
}


def form_fields(values, errors):
    """The calendar form's fields in the pages' form kit."""
    found = [FormField(name, capfirst(Calendar._meta.get_field(name).verbose_name), "text",
                       values.get(name, ""), HELP.get(name) or str(Calendar._meta.get_field(name).help_text),
                       errors.get(name, [])) for name in FIELDS]
    found.append(FormField("dates", "Typed-in dates", "textarea", values.get("dates", ""), HELP["dates"],
                           errors.get("dates", []), rows=10))
    return found


def import_fields():
    return [FormField("file", "ICS file", "file", accept=".ics,text/calendar",
                      help="All-day and several-day events become their dates; recurring events are expanded "
                           "from the start of last year to five years on."),
            FormField("replace", "Replace the typed-in dates (else the file's dates are added to them)",
                      "checkbox")]


def _calendar(request, name):
    if "\x00" in name:
        raise Http404
    try:
        return actions.visible(request.user).get(name=name)
    except Calendar.DoesNotExist:
        raise Http404 from None


def _messages(exc):
    return {name: list(texts) for name, texts in exc.fields.items()}


@login_required
@refused_is_forbidden
def calendar_list(request):
    values, errors = {}, {}
    if request.method == "POST":
        values = {name: request.POST.get(name, "") for name in FIELDS}
        values["dates"] = request.POST.get("dates", "")
        made, refused = attempt(actions.create, actor(request), Calendar(**{name: values[name] for name in FIELDS},
                                                                         dates=dates_from_text(values["dates"])))
        if not refused:
            messages.success(request, f"Calendar {made.name} made.")
            return redirect("pages:calendar", name=made.name)
        errors = _messages(refused)
    return page(request, "pages/calendars.html", {
        "calendars": actions.visible(request.user), "may_edit": actions.may_edit(actor(request)),
        "fields": form_fields(values, errors), "other_errors": errors.get(NON_FIELD_ERRORS, [])}, "calendars")


@login_required
@refused_is_forbidden
def calendar_detail(request, name):
    calendar = _calendar(request, name)
    values = {name: getattr(calendar, name) for name in FIELDS}
    values["dates"] = dates_text(calendar.dates)
    errors = {}
    if request.method == "POST":
        values = {name: request.POST.get(name, "") for name in FIELDS}
        values["dates"] = request.POST.get("dates", "")
        changes = {name: values[name] for name in FIELDS}
        changes["dates"] = dates_from_text(values["dates"])
        saved, refused = attempt(actions.edit, actor(request), calendar, changes)
        if not refused:
            messages.success(request, f"Calendar {saved.name} saved.")
            return redirect("pages:calendar", name=saved.name)
        errors = _messages(refused)
    if errors:
        calendar.refresh_from_db()  # the page shows what is stored beside the values refused
    year = datetime.now(UTC).year
    return page(request, "pages/calendar.html", {
        "calendar": calendar, "fields": form_fields(values, errors), "import_fields": import_fields(),
        "other_errors": errors.get(NON_FIELD_ERRORS, []), "may_edit": actions.may_edit(actor(request), calendar),
        "days": dates_of(calendar, (year, year + 1)), "years": (year, year + 1)}, "calendars")


def dates_of(calendar, years):
    """[{"date", "label", "source"}] of the calendar: its typed-in dates and its country's holidays of
    ``years``, in order (a date typed in and a holiday both: the typed-in label, as jobs see it)."""
    found = {item["date"]: {"date": item["date"], "label": item.get("label", ""), "source": "typed in"}
             for item in calendar.dates}
    for year in years if calendar.country else ():
        for item in calendar.holidays_in(year):
            found.setdefault(item["date"], {**item, "source": "holiday"})
    return [found[day] for day in sorted(found)]


def _too_large(request):
    """A 413 for an upload larger than an ICS file may be (with room for the form), before it is read."""
    limit = settings.JOBS_CALENDAR_ICS_MAX_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = limit + 64 * 1024 + 1
    if length <= limit + 64 * 1024:
        return None
    return HttpResponse(f"Nothing was imported: the upload is {length} bytes; an ICS file is at most {limit} "
                        "(JOBS_CALENDAR_ICS_MAX_BYTES).\n", status=413, content_type="text/plain")


@csrf_exempt  # checked below, once the user may import: the check parses the form, the file with it
@login_required
@require_POST
@refused_is_forbidden
def calendar_import(request, name):
    calendar = _calendar(request, name)
    if not actions.may_edit(actor(request), calendar):
        raise actions.ActionError(actions.STAFF_ONLY, actions.ActionError.FORBIDDEN)
    if refused := _too_large(request):
        return refused
    if refused := CsrfViewMiddleware(lambda request: None).process_view(request, None, (), {}):
        return refused
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose an .ics file to import.")
        return redirect("pages:calendar", name=calendar.name)
    imported, refused = attempt(actions.import_ics, actor(request), calendar, upload.read(),
                                replace=request.POST.get("replace") == "on")
    if refused:
        messages.error(request, f"Nothing was imported: {refused.message}")
    else:
        messages.success(request, f"Imported: {imported.name} has {counted(len(imported.dates), 'typed-in date')}.")
    return redirect("pages:calendar", name=calendar.name)


@login_required
@require_POST
@refused_is_forbidden
def calendar_delete(request, name):
    calendar = _calendar(request, name)
    _, refused = attempt(actions.delete, actor(request), calendar)
    if refused:
        messages.error(request, refused.message)
        return redirect("pages:calendar", name=calendar.name)
    messages.success(request, f"Calendar {name} deleted.")
    return redirect("pages:calendars")
