"""The ``calendars:`` section of a jobs file (``jobs.resources.CALENDARS``,
``jobs.as_code.resources``): planned and applied before ``jobs:`` (whose entries may name them) and
pruned after them.

A calendar in a file is its API shape without what the service sets: ``name`` always; ``dates``
(a date as "2026-12-31", or {date, label} when it has a label), ``description``, ``country`` and
``subdivision`` when not empty, checked as the model checks them.
"""

from django.core.exceptions import ValidationError

from ..models import Calendar
from ..models.calendar import normalised_dates
from ..resources import CALENDARS
from . import resources

DEFAULTS = {"description": "", "country": "", "subdivision": "", "dates": []}


def short_dates(dates):
    return [item if item.get("label") else item["date"] for item in dates]


def parse_entry(entry, stored=None):
    """The entry's values, checked as the model checks them; raises ValidationError with messages
    that name the entry and the key."""
    data, here = entry.data, entry.where
    if not isinstance(data, dict):
        raise ValidationError([f"{here}: must be an object with a name and dates."])
    errors = [f"{here}: unknown key '{key}'." for key in data if key not in CALENDARS.file.fields]
    if "name" not in data:
        errors.append(f"{here}: name: This field is required.")
    values = {"name": data.get("name"), **{name: data.get(name, default) for name, default in DEFAULTS.items()}}
    for name in ("name", "description", "country", "subdivision"):
        if not isinstance(values[name], str) or "\x00" in values[name]:
            errors.append(f"{here}: {name}: Must be a text (without NUL characters).")
    if errors:
        raise ValidationError(errors)
    try:
        values["dates"] = normalised_dates(values["dates"])  # a YAML date is a date: made text first
        calendar = Calendar(**values)
        calendar.full_clean(validate_unique=False)
    except ValidationError as exc:
        raise ValidationError([f"{here}: {key}: {m}" for key, ms in exc.message_dict.items() for m in ms]) from None
    return {name: getattr(calendar, name) for name in CALENDARS.file.fields}


resources.register(CALENDARS, parse_entry, exported={"dates": short_dates})
