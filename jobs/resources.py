"""What a user keeps in the service beside jobs, each declared once (``Resource``): its record, its
shape, its user actions and how each interface shows it. One generic layer each reads these
declarations: the API (``jobs.api.resources``), the sections of jobs files
(``jobs.as_code.resources``) and the admin (``jobs.admin.resources``); jobsctl, which imports
nothing of the service, declares its groups the same way (``jobsctl.resources``).

Declared here: limits, calendars, maintenance windows and teams' quotas; the channels and rules of notifications are
declared in ``notifications.resources``, workflows in ``workflows.resources``.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.module_loading import import_string

from .actions import calendars as calendar_actions
from .actions import limits as limit_actions
from .actions import quotas as quota_actions
from .actions import windows as window_actions
from .models import Calendar, Limit, TeamQuota, Window


@dataclass(frozen=True)
class FileSection:
    """How a resource stands in jobs files, under ``key``: an entry holds ``fields`` (the first
    names it and is always written; the others when not empty), and a plan's lines say ``noun``."""

    key: str
    fields: tuple
    always: tuple = ()  # written even when empty
    unchanged: str = "= unchanged {noun}s: {count}"  # the plan's last line
    shows_values: bool = True  # an update's line shows old -> new (else only the names of the fields)
    says_jobs_apply: bool = True  # the audit entries' detail is "jobs apply" ("jobs apply --prune")
    before: str | None = "jobs"  # planned and saved before that section (its entries may name these)


@dataclass(frozen=True)
class Resource:
    """One resource: its record (``model``), the shape the API answers and both the API and files
    check with (``serializer``), and its user actions, each of which checks who may and writes the
    audit entry: ``create(actor, obj)``, ``edit(actor, obj, values)``, ``delete(actor, obj)``
    (None: not deleted), ``visible(user)`` what a user sees, ``may_edit(actor, obj)`` who changes
    what (refused with ``refused``)."""

    model: type
    noun: str  # "limit": in messages and plans
    serializer: str  # its dotted path: Django REST framework is imported when a shape is first needed, not at start
    visible: Callable
    create: Callable
    edit: Callable
    delete: Callable | None = None
    may_edit: Callable | None = None
    refused: str = ""
    name_field: str | None = None  # looked up by it first, then by id (None: by id only)
    # The API: /api/<route>/, its URL names <basename>-list and -detail, what each call says, the
    # list's filters ({parameter: (int or str, description)}), whether DELETE is offered.
    route: str = ""
    basename: str = ""
    api_docs: dict = field(default_factory=dict)
    filters: dict = field(default_factory=dict)
    api_deletes: bool = True
    not_found: str | None = None  # the 404's detail (None: "Not found.")
    file: FileSection | None = None
    admin_list: tuple = ()  # the admin's list columns
    admin_search: tuple = ()

    def shape(self):
        """The serializer class."""
        return import_string(self.serializer)


LIMITS = Resource(
    model=Limit, noun="limit", serializer="jobs.schemas.limits.LimitSerializer", visible=limit_actions.visible,
    create=limit_actions.create_limit, edit=limit_actions.edit_limit, delete=limit_actions.delete_limit,
    may_edit=limit_actions.may_edit, refused=limit_actions.STAFF_ONLY, name_field="key",
    route="limits", basename="limit", not_found="No limit has this key or id.",
    api_docs={
        "list": "The limits you may name (yours, your teams', the shared ones), by key, with how many runs of their "
                "jobs run and wait now.",
        "create": "Define a limit: yours, and your team's when `group` is given. Only staff set `shared`.",
        "retrieve": "One limit, by its key (or its id).",
        "partial_update": "Change some fields of a limit of yours or your team's (staff: any). A key that jobs name "
                          "cannot change.",
        "update": "Replace a limit's fields (yours or your team's; staff: any).",
        "destroy": "Delete a limit of yours or your team's (staff: any); refused (409) while jobs name it.",
    },
    file=FileSection("limits", fields=limit_actions.EDITABLE, always=("key", "max_running"),
                     unchanged="= limits unchanged: {count}"),
    admin_list=("key", "max_running", "max_starts_per_minute", "running", "waiting", "jobs", "owner", "group",
                "shared"),
    admin_search=("key", "description"),
)

CALENDARS = Resource(
    model=Calendar, noun="calendar", serializer="jobs.schemas.calendars.CalendarSerializer", visible=calendar_actions.visible,
    create=calendar_actions.create, edit=calendar_actions.edit, delete=calendar_actions.delete,
    may_edit=calendar_actions.may_edit, refused=calendar_actions.STAFF_ONLY, name_field="name",
    route="calendars", basename="calendar", filters={"name": (str, "Exact name.")},
    api_docs={
        "list": "The calendars you may name (yours, your teams', the shared ones), by name.",
        "create": "Make a calendar (yours; your team's with `group`; only staff set `shared`): typed-in `dates`, "
                  "and/or a `country` (and `subdivision`) whose public holidays of every year are its dates too.",
        "retrieve": "One calendar, by id or by name.",
        "partial_update": "Change some fields (of yours or your team's; staff: any). A calendar that jobs use keeps "
                          "its name.",
        "destroy": "Delete a calendar (of yours or your team's; staff: any) that no job uses (409 otherwise).",
    },
    file=FileSection("calendars", fields=("name", "description", "country", "subdivision", "dates"),
                     shows_values=False, says_jobs_apply=False),
    admin_list=("name", "description", "country", "subdivision", "date_count", "owner", "group", "shared",
                "updated_at"),
    admin_search=("name", "description"),
)

WINDOWS = Resource(
    model=Window, noun="window", serializer="jobs.schemas.windows.WindowSerializer", visible=window_actions.visible,
    create=window_actions.create, edit=window_actions.edit, delete=window_actions.delete,
    may_edit=window_actions.may_edit, refused=window_actions.STAFF_ONLY, name_field="name",
    route="windows", basename="window", not_found="No window has this name or id.",
    filters={"mode": (str, "hold or mute.")},
    api_docs={
        "list": "The maintenance windows you see (yours, your teams', the shared ones), by name.",
        "create": "Make a maintenance window: one-off (`starts_at`, `ends_at`) or recurring (`cron`, "
                  "`duration_seconds`, `timezone`), over `jobs` (ids) and `tags`. `mode` `hold` skips the slots "
                  "inside (reason maintenance); `mute` runs them and sends no notification.",
        "retrieve": "One window, by its name (or its id).",
        "partial_update": "Change some fields of a window of yours or your team's (staff: any).",
        "update": "Replace a window's fields (yours or your team's; staff: any).",
        "destroy": "Delete a window of yours or your team's (staff: any).",
    },
    file=FileSection("windows", fields=window_actions.EDITABLE, always=("name", "mode")),
    admin_list=("name", "mode", "starts_at", "ends_at", "cron", "duration_seconds", "timezone", "owner", "group",
                "shared"),
    admin_search=("name", "description"),
)

QUOTAS = Resource(
    model=TeamQuota, noun="quota", serializer="jobs.schemas.quotas.TeamQuotaSerializer", visible=quota_actions.visible_team_quotas,
    create=quota_actions.save_team_quota, edit=quota_actions.save_team_quota, delete=quota_actions.delete_team_quota,
    route="quotas", basename="quota", api_deletes=False,
    api_docs={
        "list": "The teams' quotas: every team's for staff, your own teams' for anyone else. An empty quota is no "
                "bound for the team (each member keeps their own).",
        "create": "Set a team's quotas (staff only).",
        "retrieve": "One team's quotas.",
        "partial_update": "Change some of a team's quotas (staff only).",
        "update": "Replace a team's quotas (staff only).",
    },
    admin_list=("group", *quota_actions.TEAM_FIELDS, "updated_at"),
    admin_search=("group__name",),
)
