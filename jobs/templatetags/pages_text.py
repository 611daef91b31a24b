"""Wording of the pages: a moment as "just now", "3 minutes ago", "in under a minute", "in 2 hours"
(Django's timesince says "0 minutes" under a minute)."""

import json
from datetime import timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince, timeuntil

register = template.Library()

MINUTE = timedelta(minutes=1)


@register.filter
def ago(moment):
    """"just now" within a minute, else "3 minutes ago" (a moment to come reads as "just now")."""
    if not moment:
        return ""
    if timezone.now() - moment < MINUTE:
        return "just now"
    return f"{timesince(moment)} ago"


@register.filter
def from_now(moment):
    """"in under a minute", "in 2 hours, 5 minutes", or "due now" for a moment already past."""
    if not moment:
        return ""
    left = moment - timezone.now()
    if left <= timedelta(0):
        return "due now"
    if left < MINUTE:
        return "in under a minute"
    return f"in {timeuntil(moment)}"


@register.filter
def as_json(value):
    """A value of the audit trail as JSON (``{"required": false}``, not Python's ``{'required': False}``);
    text as it is; nothing as "—"."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def ordinal(n):
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@register.filter
def business_day(n):
    """A job's ``business_day_of_month`` in words: 1 "1st", 3 "3rd", -1 "last", -2 "2nd from the end"."""
    if n == -1:
        return "last"
    return ordinal(n) if n > 0 else f"{ordinal(-n)} from the end"
