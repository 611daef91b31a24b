"""A job's own place in a crowd: its ``spread`` offset and the ``H`` of its cron expression.

Both come from the MD5 of the job's name, not from Python's ``hash()`` (salted per process since
Python 3.3): the name is known before the job is first saved (so a schedule with ``H`` is resolved
in the same save), it is the same on every host and after every restart, and a job exported to
another installation (jobs-as-code) keeps its minute there, as Jenkins' ``H`` does with a job's
name. Renaming a job moves it. MD5 is used as a spreading hash, not for security. The job keeps its
offset in a column (``Job.spread_offset_seconds``) for the forecast's grouping queries.
"""

import functools
import hashlib
import re

from django.core.exceptions import ValidationError

MAX_SPREAD_SECONDS = 86400


def name_hash(key):
    """A 32-bit number from ``key``: the first 8 hex digits of its MD5."""
    return int(hashlib.md5(key.encode()).hexdigest()[:8], 16)


def offset_seconds(name, spread):
    """The job's offset in [0, spread) seconds; 0 without a spread."""
    return name_hash(name) % spread if spread else 0



# --- H in cron expressions (Jenkins' syntax): H, H(a-b), H/n, H(a-b)/n, alone or in a list

FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 28), ("month", 1, 12), ("day of week", 0, 6))
# Day of month: 1-28 as in Jenkins, so a hashed day is in every month.
# At most 4 digits a number: a longer one is no minute, hour or day (and Python refuses to read a
# number of more than 4,300 digits).
HASHED = re.compile(r"^H(?:\((\d{1,4})-(\d{1,4})\))?(?:/(\d{1,4}))?$")


def uses_hash(expression):
    return isinstance(expression, str) and _uses_hash(expression)


@functools.lru_cache(maxsize=8192)  # asked several times per job saved; a file holds a few thousand expressions
def _uses_hash(expression):
    return any(item[:1].upper() == "H" for field in expression.split() for item in field.split(","))


def _resolve_item(item, index, key):
    title, low, high = FIELDS[index]
    match = HASHED.match(item.upper())
    if not match:
        shown = item if len(item) <= 40 else f"{item[:40]}…"
        raise ValidationError(f"'{shown}' in the {title} field: H is written H, H(a-b), H/n or H(a-b)/n, "
                              "each number of at most 4 digits.")
    first, last, step = match.groups()
    if first is not None:
        first, last = int(first), int(last)
        if not low <= first <= last <= high:
            raise ValidationError(f"'{item}' in the {title} field: the range must lie within {low}-{high}, low to high.")
    else:
        first, last = low, high
    number = name_hash(f"{key}\x00{index}")
    if step is None:
        return str(first + number % (last - first + 1))
    step = int(step)
    if not 1 <= step <= last - first + 1:
        raise ValidationError(f"'{item}' in the {title} field: the step must be from 1 to {last - first + 1}.")
    return f"{first + number % step}-{last}/{step}"


def resolve(expression, key):
    """``expression`` with each H replaced by the number (or the stepped range) that ``key`` hashes
    to, field by field: a plain cron expression that croniter and django-celery-beat read. An
    expression without H comes back as it is."""
    if not uses_hash(expression):
        return expression
    fields = expression.split()
    if len(fields) != 5:
        return expression  # validate_cron names the problem
    return " ".join(
        ",".join(_resolve_item(item, index, key) if item[:1].upper() == "H" else item for item in field.split(","))
        for index, field in enumerate(fields)
    )
