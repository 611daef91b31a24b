"""The ``limits:`` section of a jobs file (``jobs.resources.LIMITS``, ``jobs.as_code.resources``):
limits shared across jobs, planned and saved before the ``jobs:`` section, so a job of the same file
may name one (its ``limit_key``).

An entry is a limit of the API (``key``, ``max_running``, optional ``max_starts_per_minute`` and
``description``, ``group`` and ``shared``), checked by its serializer. A field left out goes back
to its default; who shares a limit (group, shared) is kept as it is when left out.
"""

from django.core.exceptions import ValidationError
from rest_framework import serializers

from ..actions import limits as actions
from ..resources import LIMITS
from ..schemas.limits import LimitSerializer
from . import files, resources

DEFAULTS = {"max_starts_per_minute": None, "description": ""}


def parse_entry(entry, stored):
    data = entry.data
    if not isinstance(data, dict):
        raise ValidationError([f"{entry.where}: must be an object with key and max_running."])
    unknown = [f"{entry.where}: unknown key '{name}'." for name in data if name not in actions.EDITABLE]
    try:
        values = LimitSerializer(stored, data={**DEFAULTS, **data}).run_validation({**DEFAULTS, **data})
    except serializers.ValidationError as exc:
        lines = files.messages_of(serializers.as_serializer_error(exc))
        raise ValidationError(unknown + [f"{entry.where}: {line}" for line in lines]) from None
    if unknown:
        raise ValidationError(unknown)
    return values


resources.register(LIMITS, parse_entry)
