"""The query parameters of the API's calls, read and checked: a 400 naming the parameter when one is
not what the call takes."""

from datetime import UTC, datetime, time

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from rest_framework.exceptions import ValidationError


def bool_param(params, name):
    value = params[name].strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValidationError({name: ["Must be true or false."]})


def choice_param(params, name, choices):
    value = params[name]
    if value not in choices:
        raise ValidationError({name: [f"Must be one of {', '.join(choices)}."]})
    return value


MAX_ID = 2**63 - 1  # ids are bigints: a larger number names nothing (and SQLite cannot compare it)


def int_param(params, name):
    try:
        value = int(params[name])
    except ValueError:
        raise ValidationError({name: ["Must be a whole number."]}) from None
    if not -MAX_ID <= value <= MAX_ID:
        raise ValidationError({name: [f"Must be a whole number within ±{MAX_ID}."]})
    return value


def datetime_param(params, name):
    """An ISO 8601 date and time (or a date, meaning its midnight); naive means UTC."""
    value = params[name].strip().replace(" ", "+")  # an unescaped + in a query string reads as a space
    try:
        moment = parse_datetime(value)
        if moment is None and (day := parse_date(value)) is not None:
            moment = datetime.combine(day, time.min)
    except ValueError:
        moment = None
    if moment is None:
        raise ValidationError({name: ["Must be an ISO 8601 date and time, such as 2025-01-31T12:00:00Z."]})
    if timezone.is_naive(moment):
        return timezone.make_aware(moment, UTC)
    try:
        # In UTC: PostgreSQL rejects UTC offsets beyond 15:59 that Python accepts (a 500).
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValidationError({name: ["Is out of the range of dates."]}) from None


def text_param(params, name):
    value = params[name]
    if "\x00" in value:  # PostgreSQL text cannot hold NUL: a 500 if it reached a query
        raise ValidationError({name: ["Must not contain NUL characters."]})
    return value
