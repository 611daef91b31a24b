"""The ``windows:`` section of a jobs file (``jobs.resources.WINDOWS``, ``jobs.as_code.resources``):
maintenance windows, planned and saved before the ``jobs:`` section.

An entry is a window of the API (``name``, ``mode``; ``starts_at`` and ``ends_at``, or ``cron``,
``duration_seconds`` and ``timezone``; ``jobs`` (ids), ``tags``, ``description``, ``group``,
``shared``), checked by its serializer. A field left out goes back to its default.
"""

from ..actions import windows as actions
from ..resources import WINDOWS
from ..schemas.windows import WindowSerializer
from . import resources

DEFAULTS = {"description": "", "mode": "hold", "starts_at": None, "ends_at": None, "cron": "",
            "duration_seconds": None, "timezone": "", "jobs": [], "tags": []}


parse_entry = resources.checked_by(WindowSerializer, DEFAULTS, actions.EDITABLE, "a name and when it holds")


def short_time(value):
    return value.isoformat() if value else value


resources.register(WINDOWS, parse_entry, exported={"starts_at": short_time, "ends_at": short_time})
