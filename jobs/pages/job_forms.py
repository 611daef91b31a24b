"""The job forms of the pages: create, edit, clone and delete a job, and the schedule's preview.

The rules are the API's: a submitted form is turned into the API's JSON shape of a job and checked
by ``JobSerializer``, then saved by ``actions.create``/``actions.edit`` as the API does, so a page
and the API accept the same jobs and give the same messages, field by field. This module only
translates: key/value rows into objects, a comma list into a list, the schedule's fields into the
schedule object, and the errors back onto the form's fields.
"""

import functools
import json
import re
import zoneinfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models, transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import capfirst
from django.views.decorators.http import require_POST
from rest_framework import serializers
from rest_framework.settings import api_settings

from .. import kinds
from ..access import secrets
from ..actions import jobs as actions
from ..actions.permissions import guarded_kinds, may_run_command_jobs, owned_or_shared, sees_everything, visible_jobs
from ..definitions import fields as job_fields
from ..definitions import jobs as definitions
from ..models import DstRepeated, DstSkipped, Job, Limit, ScheduleType
from ..schemas.jobs import JobSerializer, ScheduleField, field_errors
from ..timing.spread import MAX_SPREAD_SECONDS
from . import parameter_rows
from .common import actor, attempt, job_timezone, page, refused_is_forbidden, slot_text
from .form_kit import NONE, FormField, model_widget

PREVIEW_SLOTS = 10

# The form's cards are the groups of jobs.definitions.fields, each with the fields the API lets a user set;
# only the fields of the chosen kind (jobs.kinds) and schedule type are shown, read and sent.
SCHEDULE_FIELDS = {ScheduleType.CRON: ["cron", "timezone"], ScheduleType.INTERVAL: ["every_seconds"],
                   ScheduleType.ONCE: ["run_at"], ScheduleType.MANUAL: []}

ROWS = {"kwargs", "environment", "http_headers"}  # {name: value} as rows of name and value
SECRET_ROWS = set(secrets.FIELDS)                  # the same, the values write-only
JSON_VALUES = {"args", "kwargs"}                   # values that may be any JSON (42, true, [1, 2])
LISTS = {"args"}                                   # [value, ...] as rows of one value
CHECKBOXES = {"enabled", "retry_jitter", "business_days"}
PARAMETERS = "parameters"                          # rows of a declaration each (parameter_rows)

LABELS = {
    "target": "Target", "tags": "Tags", "group": "Group", "queue": "Queue", "args": "Arguments",
    "kwargs": "Keyword arguments", "environment": "Environment", "secret_environment": "Secret environment",
    "http_method": "Method", "http_headers": "Headers", "secret_http_headers": "Secret headers",
    "http_body": "Body", "http_ok_statuses": "Accepted statuses", "schedule_type": "Schedule",
    "cron": "Cron expression", "timezone": "Timezone", "every_seconds": "Every (seconds)",
    "run_at": "At", "memory_limit_mb": "Memory limit (MB)", "sla_seconds": "SLA seconds",
    "catchup_policy": "Catch-up policy", "catchup_max": "Catch-up max",
}
HELP = {
    "tags": "Separated by commas.",
    "calendars": "Names of calendars (the Calendars page), separated by commas: the job skips their dates.",
    "group": "A group of yours whose members may also see and run the job.",
    "queue": "Empty: the default queue.",
    "args": "Positional arguments, one a row. A value that reads as JSON (42, true, [1, 2], \"text\") is "
            "taken as that; anything else as text.",
    "kwargs": "A value that reads as JSON (42, true, [1, 2], \"text\") is taken as that; anything else as text.",
    "secret_environment": f"Values are write-only: a stored one shows as {secrets.MASK} and is kept unless "
                          "you type a new one; removing the row removes it.",
    "secret_http_headers": f"Values are write-only: a stored one shows as {secrets.MASK} and is kept unless "
                           "you type a new one; removing the row removes it.",
    "http_ok_statuses": "Separated by commas; empty means any 2xx.",
    "parameters": "Values a run is given, one a row: a name (an identifier, e.g. day), its type, a default (as a "
                  "run's value is typed: 2026-11-01, 42, true), whether a run must give it, a description, and for a "
                  "choice its choices separated by commas. A command gets each as JOB_PARAM_<NAME>; an HTTP call "
                  "through {{params.<name>}} in its URL or body; a function as a keyword argument.",
    "cron": "Five fields: minute hour day-of-month month weekday, e.g. */15 * * * *.",
    "timezone": "IANA name, e.g. Europe/Berlin.",
    "run_at": "ISO 8601 with a UTC offset, e.g. 2026-12-01T09:00:00+01:00.",
}


@functools.cache
def timezone_names():
    return sorted(zoneinfo.available_timezones())


# --- between the form's values and the API's shape of a job


def strict_json(text):
    """JSON as the API reads it: NaN and Infinity are not values (PostgreSQL cannot store them)."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def json_text(value):
    """A JSON value as a row shows it: text that would not read back as itself is quoted."""
    if isinstance(value, str):
        try:
            strict_json(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def json_value(text):
    try:
        return strict_json(text)
    except ValueError:
        return text


def from_api(data):
    """The form's values of a job in the API's shape (``JobSerializer(job).data``)."""
    values = {name: value for name, value in data.items() if name != "schedule"}
    values["tags"] = ", ".join(data.get("tags") or [])
    values["calendars"] = ", ".join(data.get("calendars") or [])
    values["http_ok_statuses"] = ", ".join(str(code) for code in data.get("http_ok_statuses") or [])
    values["group"] = data.get("group") or ""
    for name in ROWS | SECRET_ROWS:
        render = json_text if name in JSON_VALUES else str
        values[name] = [(key, render(value)) for key, value in (data.get(name) or {}).items()]
    values["args"] = [json_text(value) for value in data.get("args") or []]
    values[PARAMETERS] = parameter_rows.from_api(data.get(PARAMETERS))
    schedule = data.get("schedule") or {"type": ScheduleType.MANUAL}
    values["schedule_type"] = schedule["type"]
    values.update({name: "" if value is None else str(value) for name, value in schedule.items() if name != "type"})
    for name, value in values.items():
        if value is None:
            values[name] = ""
    return values


def from_post(post):
    """The form's values as submitted: text, checkboxes, and rows of (name, value) or values."""
    values = {name: post.get(name, "") for name in post if not name.startswith(f"{PARAMETERS}-")
              and not name.endswith(("-key", "-value"))}
    values.pop("csrfmiddlewaretoken", None)
    for name in CHECKBOXES:
        values[name] = name in post
    for name in ROWS | SECRET_ROWS:
        values[name] = [(key, value) for key, value in zip(post.getlist(f"{name}-key"),
                                                           post.getlist(f"{name}-value"), strict=False)
                        if key.strip() or value.strip()]
    values["args"] = [value for value in post.getlist("args-value") if value.strip()]
    values[PARAMETERS] = parameter_rows.from_post(post, PARAMETERS)
    return values


@functools.cache
def settable():
    """The fields of jobs.definitions.fields a user sets (the API's writable ones), the schedule apart."""
    return {name for name, api_field in JobSerializer().fields.items() if not api_field.read_only} - {"schedule"}


def common_fields(group):
    return [name for name in job_fields.common(group) if name in settable()]


def shown_fields(kind):
    """The fields read and sent for a job of ``kind``."""
    ours = set(kinds.fields_of(kind))
    return [name for name in job_fields.EDITABLE
            if name in settable() and (name not in job_fields.KIND_FIELDS or name in ours)]


def default_kind(user=None):
    """The first kind ``user`` may create (the first kind of all without a user)."""
    return next(iter(kinds_for(user) if user is not None else kinds.kinds()), "")


def kinds_for(user):
    """The kinds ``user`` may create, in the registry's order: a kind that needs a permission
    (command jobs, jobs.actions.permissions) only for those who hold it."""
    guarded = set() if may_run_command_jobs(user) else guarded_kinds()
    return [name for name in kinds.kinds() if name not in guarded]


def field_options(name):
    """Suggestions for a kind's own field: its choices (HTTP methods)."""
    for spec in kinds.kinds().values():
        if name in spec.field_options:
            return list(spec.field_options[name])
    return []


def schedule_object(values):
    """The schedule object of the API from the form's schedule fields (only the chosen type's)."""
    schedule_type = values.get("schedule_type") or ScheduleType.MANUAL
    schedule = {"type": schedule_type}
    for name in SCHEDULE_FIELDS.get(schedule_type, []):
        value = values.get(name, "")
        schedule[name] = int(value) if name == "every_seconds" and re.fullmatch(r"\s*-?\d+\s*", value) else value
    return schedule


def to_api(values, nullable):
    """(the API's JSON body, {field: [messages]} for rows that are not a value) of the form's values.
    ``nullable``: the fields an empty text sets to null."""
    data, errors = {}, {}
    for name in shown_fields(values.get("kind")):
        if name not in values:
            continue
        value = values[name]
        if name in LISTS:
            value = [json_value(item) for item in value]
        elif name in ROWS | SECRET_ROWS:
            value, problem = rows_object(name, value)
            if problem:
                errors[name] = [problem]
        elif name == PARAMETERS:
            value = parameter_rows.to_api(value)
        elif name in ("tags", "calendars"):
            value = [item.strip() for item in value.split(",") if item.strip()]
        elif name == "http_ok_statuses":
            value = [int(code) if code.isdigit() else code for code in re.split(r"[\s,]+", value) if code]
        elif name == "group":
            value = value or None
        elif value == "" and name in nullable:
            value = None
        data[name] = value
    data["schedule"] = schedule_object(values)
    return data, errors


def rows_object(name, rows):
    found = {}
    for key, value in rows:
        key = key.strip()
        if not key:
            return None, f"Every row with a value needs a name (the row with the value '{value}')."
        if key in found:
            return None, f"The name {key} is given twice."
        found[key] = json_value(value) if name in JSON_VALUES else value
    return found, None


def flat(texts):
    if isinstance(texts, dict):
        return [f"{key}: {text}" for key, inner in texts.items() for text in flat(inner)]
    if isinstance(texts, list | tuple):
        return [text for inner in texts for text in flat(inner)]
    return [str(texts)]


def form_errors(errors):
    """The API's errors ({field: [messages]}, the schedule's parts nested under ``schedule``) on the
    form's fields; ``__all__`` for those of no field."""
    found = {}
    for name, texts in errors.items():
        if name == "schedule" and isinstance(texts, dict):
            for part, inner in texts.items():
                target = "schedule_type" if part in ("type", "schedule") else part
                found.setdefault(target, []).extend(flat(inner))
        else:
            target = {"schedule": "schedule_type", api_settings.NON_FIELD_ERRORS_KEY: "__all__"}.get(name, name)
            found.setdefault(target, []).extend(flat(texts))
    return found


# --- the fields as the template draws them


def linked_help(name):
    """The help of a field that points at a page of the site, with the link."""
    if name == "limit_key":
        return format_html('The key of a limit (the <a href="{}">Limits page</a>) shared with other jobs: its runs '
                           "wait while the limit is full.", reverse("pages:limits"))
    if name == "spread":
        return format_html("Move every slot by the same offset in [0, spread) seconds, chosen from a hash of the "
                           "job's name: jobs on one schedule stop starting in the same second. The "
                           '<a href="{}">load forecast</a> shows where slots pile up and spreads them (the guide: '
                           '"Load forecast and spreading").', reverse("pages:forecast"))
    return ""


def make_field(name, values, errors, request):
    kind = values.get("kind") or default_kind()
    try:
        model_field = Job._meta.get_field(name)
    except Exception:  # the schedule's fields are not the model's
        model_field = None
    label = LABELS.get(name) or (capfirst(model_field.verbose_name) if model_field else name)  # "DST: …" kept
    help_text = linked_help(name) or HELP.get(name, getattr(model_field, "help_text", "") or "")
    widget = ("secret-rows" if name in SECRET_ROWS else "rows" if name in ROWS else "list" if name in LISTS
              else "parameters" if name == PARAMETERS
              else "text" if name in ("tags", "calendars", "http_ok_statuses", "target") or model_field is None
              else model_widget(model_field))
    made = FormField(name, label, widget, values.get(name, ""), str(help_text), errors.get(name, []))
    if model_field is not None and model_field.choices:
        made.choices = list(model_field.choices)
    if isinstance(model_field, models.FloatField):
        made.step = "any"
    if name == PARAMETERS:
        made.choices = parameter_rows.type_choices()
    elif name == "target":
        made.options_by_kind, made.options_kind = kinds.target_options(), kind
    elif name in job_fields.KIND_FIELDS:
        made.options = field_options(name)
    elif name == "group":
        made.widget, made.choices = "select", [("", NONE), *group_choices(request.user, made.value)]
    elif name == "queue":
        made.options = sorted(settings.JOBS_QUEUES)
    elif name == "timezone":
        made.options = timezone_names()
    elif name == "limit_key":
        made.options = list(owned_or_shared(Limit.objects.all(), request.user).values_list("key", flat=True)[:1000])
    elif name == "every_seconds":
        made.widget = "number"
    elif name == "schedule_type":
        made.widget, made.choices = "select", list(ScheduleType.choices)
    elif name == "kind":
        # Only the kinds this user may create (a job of a kind the user may not change cannot be
        # edited here at all: the page is refused).
        allowed = set(kinds_for(request.user))
        made.widget, made.choices = "select", [(value, text) for value, text in made.choices if value in allowed]
    return made


def group_choices(user, current):
    groups = Group.objects.all() if sees_everything(user) else user.groups.all()
    names = list(groups.order_by("name").values_list("name", flat=True))
    if current and current not in names:  # set by someone else: kept unless changed
        names.append(current)
    return [(name, name) for name in names]


def form_context(request, values, errors, job=None):
    kind = values.get("kind") or ""
    schedule_type = values.get("schedule_type") or ScheduleType.MANUAL

    def fields(names):
        return [make_field(name, values, errors, request) for name in names]

    fieldsets = kinds.fieldsets()
    shown = {*settable(), "schedule_type", *(n for names in SCHEDULE_FIELDS.values() for n in names)}
    return {
        "job": job,
        "kind": kind,
        "schedule_type": schedule_type,
        "groups": [{"title": group.title, "fields": fields(common_fields(group)),
                    "kinds": [(" ".join(names), label, kind in names, fields(own)) for names, label, own in fieldsets
                              if set(own) <= set(group.fields)],
                    "schedule": "schedule" in group.fields}
                   for group in job_fields.GROUPS],
        "schedule_field": make_field("schedule_type", values, errors, request),
        "schedules": [(value, fields(SCHEDULE_FIELDS[value])) for value in ScheduleType.values],
        "other_errors": [text for name, texts in errors.items() if name not in shown for text in texts],
        "preview": schedule_preview(schedule_object(values), values),
        "mask": secrets.MASK,
    }


# --- the schedule in words and its next slots


def day_rules_of(params):
    """The job's day rules (calendars, business days) as the form has them, for the preview."""
    nth = params.get("business_day_of_month", "").strip()
    return {"calendars": [name.strip() for name in params.get("calendars", "").split(",") if name.strip()],
            "business_days": params.get("business_days") in ("on", "true", "1"),
            "business_day_of_month": int(nth) if re.fullmatch(r"-?\d{1,3}", nth) else None}


def schedule_preview(spec, values=None, day_rules=None):
    """{"description", "timezone", "slots"} of a schedule object (and the job's day rules), or
    {"errors": {field: [...]}} with the API's messages. ``values``: the form's, whose DST policy the
    slots follow (the default where it is not one of the choices), and whose name and spread place an
    H and the slots."""
    try:
        spec = ScheduleField().to_internal_value(spec)["schedule"]
    except serializers.ValidationError as exc:
        return {"errors": form_errors({"schedule": exc.detail})}
    values = values or {}
    try:
        seconds = min(max(int(values.get("spread") or 0), 0), MAX_SPREAD_SECONDS)
    except (TypeError, ValueError):
        seconds = 0  # the form's own check names it
    job = definitions.preview_schedule(spec, str(values.get("name") or ""), seconds)
    for name, choices in (("dst_skipped", DstSkipped.values), ("dst_repeated", DstRepeated.values)):
        if values.get(name) in choices:
            setattr(job, name, values[name])
    for name, value in (day_rules or {}).items():
        setattr(job, name, value)
    if errors := job.day_rule_errors():
        return {"errors": errors}
    zone = job_timezone(job)
    slots = job.upcoming_slots(PREVIEW_SLOTS)
    return {
        "description": job.describe_schedule(),
        "timezone": zone,
        "slots": [slot_text(slot, zone) for slot in slots],
    }


@login_required
def schedule_preview_view(request):
    """What the form shows as the schedule is typed: GET with the form's schedule fields."""
    return JsonResponse(schedule_preview(schedule_object(request.GET), request.GET, day_rules_of(request.GET)))


# --- the views


def editable_job(request, pk, lock=False):
    """A job the user sees (404 otherwise) and may act on (403 otherwise)."""
    jobs = visible_jobs(request.user).select_related("owner", "group", "last_run", "crontab", "interval", "clocked")
    if lock:  # as the API's update: held until the edit commits
        jobs = jobs.select_for_update(of=("self",))
    job = get_object_or_404(jobs, pk=pk)
    if not actions.may_act_on(actor(request), job):
        raise PermissionDenied(actions.COMMAND_JOBS_DENIED)
    return job


def nullable_fields():
    return {name for name, api_field in JobSerializer().fields.items() if getattr(api_field, "allow_null", False)}


def save(request, job=None):
    """Validate and save the submitted form: (the job, None), or (None, (values, errors, status))."""
    values = from_post(request.POST)
    data, row_errors = to_api(values, nullable_fields())
    if job is not None and data.get("group") == (job.group.name if job.group else None):
        # Kept as it is, as when the API is sent no group: a group someone else set (staff) is not a
        # new choice of this user's, whose groups the serializer checks.
        data.pop("group", None)
    serializer = JobSerializer(job, data=data, partial=job is not None,
                               context={"actor": actor(request), "request": request})
    valid = serializer.is_valid()
    if not valid or row_errors:
        return None, (values, {**(form_errors(serializer.errors) if not valid else {}), **row_errors}, 400)
    fields = dict(serializer.validated_data)
    schedule = fields.pop("schedule", None)
    try:
        if job is None:
            saved = actions.create(actor(request), Job(owner=request.user, **fields), schedule)
        else:
            saved = actions.edit(actor(request), job, fields, schedule)
    except actions.ActionError as exc:
        status = 403 if exc.kind == actions.ActionError.FORBIDDEN else 409 if exc.kind == exc.CONFLICT else 400
        return None, (values, form_errors(field_errors(DjangoValidationError(exc.fields))), status)
    return saved, None


@login_required
def job_create(request):
    values = from_api(JobSerializer(Job(), context={"request": request}).data)
    values.update(kind=default_kind(request.user), enabled=True, schedule_type=ScheduleType.MANUAL, timezone="UTC")
    errors, status = {}, 200
    if request.method == "POST":
        with transaction.atomic():
            saved, failed = save(request)
        if saved is not None:
            messages.success(request, f"{saved.name} is created.")
            return redirect("pages:job", pk=saved.pk)
        values, errors, status = failed
    response = page(request, "pages/job_form.html", form_context(request, values, errors), "jobs")
    response.status_code = status
    return response


@login_required
def job_edit(request, pk):
    errors, status = {}, 200
    if request.method == "POST":
        with transaction.atomic():
            job = editable_job(request, pk, lock=True)
            saved, failed = save(request, job)
        if saved is not None:
            messages.success(request, f"{saved.name} is saved.")
            return redirect("pages:job", pk=saved.pk)
        values, errors, status = failed
        job = editable_job(request, pk)
    else:
        job = editable_job(request, pk)
        values = from_api(JobSerializer(job, context={"request": request}).data)
    response = page(request, "pages/job_form.html", form_context(request, values, errors, job), "jobs")
    response.status_code = status
    return response


@login_required
@require_POST
@refused_is_forbidden
def job_clone(request, pk):
    original = editable_job(request, pk)
    copy, refused = attempt(actions.clone, actor(request), original)
    if refused:
        messages.error(request, refused.message)  # over the user's quota of jobs
        return redirect("pages:job", pk=original.pk)
    messages.success(request, f"{copy.name} is a paused copy of {original.name}: change what differs, save, "
                              "and resume it when it is ready.")
    return redirect("pages:job-edit", pk=copy.pk)


@login_required
@refused_is_forbidden
def job_delete(request, pk):
    job = editable_job(request, pk)
    if request.method == "POST":
        try:
            actions.delete(actor(request), job)
        except actions.ActionError as exc:
            messages.error(request, exc.message)
            return redirect("pages:job", pk=job.pk)
        messages.success(request, f"{job.name} is deleted, with its runs.")
        return redirect("pages:jobs")
    return page(request, "pages/job_delete.html", {"job": job}, "jobs")
