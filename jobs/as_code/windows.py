"""The ``windows:`` section of a jobs file (``jobs.resources.WINDOWS``, ``jobs.as_code.resources``):
maintenance windows, planned and saved before the ``jobs:`` section.

An entry is a window of the API (``name``, ``mode``; ``starts_at`` and ``ends_at``, or ``cron``,
``duration_seconds`` and ``timezone``; ``jobs`` (ids), ``tags``, ``description``, ``group``,
``shared``), checked by its serializer. A field left out goes back to its default.
"""

from django.core.exceptions import ValidationError
from rest_framework import serializers

from ..actions import windows as actions
from ..resources import WINDOWS
from ..schemas.windows import WindowSerializer
from . import files, resources

DEFAULTS = {"description": "", "mode": "hold", "starts_at": None, "ends_at": None, "cron": "",
            "duration_seconds": None, "timezone": "", "jobs": [], "tags": []}


def parse_entry(entry, stored):
    data = entry.data
    if not isinstance(data, dict):
        raise ValidationError([f"{entry.where}: must be an object with a name and when it holds."])
    unknown = [f"{entry.where}: unknown key '{name}'." for name in data if name not in actions.EDITABLE]
    try:
        values = WindowSerializer(stored, data={**DEFAULTS, **data}).run_validation({**DEFAULTS, **data})
    except serializers.ValidationError as exc:
        lines = files.messages_of(serializers.as_serializer_error(exc))
        raise ValidationError(unknown + [f"{entry.where}: {line}" for line in lines]) from None
    if unknown:
        raise ValidationError(unknown)
    return values


def short_time(value):
    return value.isoformat() if value else value


resources.register(WINDOWS, parse_entry, exported={"starts_at": short_time, "ends_at": short_time})
