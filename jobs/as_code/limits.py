"""The ``limits:`` section of a jobs file (``jobs.resources.LIMITS``, ``jobs.as_code.resources``):
limits shared across jobs, planned and saved before the ``jobs:`` section, so a job of the same file
may name one (its ``limit_key``).

An entry is a limit of the API (``key``, ``max_running``, optional ``max_starts_per_minute`` and
``description``, ``group`` and ``shared``), checked by its serializer. A field left out goes back
to its default; who shares a limit (group, shared) is kept as it is when left out.
"""

from ..actions import limits as actions
from ..resources import LIMITS
from ..schemas.limits import LimitSerializer
from . import resources

DEFAULTS = {"max_starts_per_minute": None, "description": ""}


parse_entry = resources.checked_by(LimitSerializer, DEFAULTS, actions.EDITABLE, "key and max_running")

resources.register(LIMITS, parse_entry)
