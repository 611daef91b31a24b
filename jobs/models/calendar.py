"""A calendar: a named set of dates (holidays and closures) that jobs skip or that bound their
business days (``Job.calendars``, ``Job.business_days``, ``Job.business_day_of_month``).

Its dates are the ones typed in or imported (``dates``: [{"date": "2026-12-24", "label": "Christmas
Eve"}]) and, with a ``country`` (and a ``subdivision``), the public holidays of the ``holidays``
package for whatever year is asked: a calendar filled from a country never runs out at the end of
a year and needs no refresh (the package's version, pinned in requirements.txt, decides the dates).

The scheduler reads calendars often (each slot of a job with day rules): ``day_rules`` keeps each
calendar's dates per process, and checks at most every ``CHECK_SECONDS`` (and at each tick of the
scheduler, ``refresh``) whether any calendar changed; a change is seen through ``revision``, which
every save increases.
"""

import threading
import time
from datetime import date, datetime

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import F

from ..timing.calendars import DayRules
from .fields import Shareable

NAME_PATTERN = r"^(?![0-9]+\Z)[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z"  # never only digits: the API takes an id or a name
NAME_RULE = ("Letters, digits, '.', '_' and '-', starting with a letter or a digit, not only digits, at most 100 "
             "characters.")
MAX_DATES = 10000  # dates typed in or imported into one calendar
MAX_LABEL = 200
CHECK_SECONDS = 1.0  # how stale a process's copy of the calendars may be, outside the scheduler's tick
HOLIDAYS_LANGUAGE = "en_US"  # the holidays' labels, where the package has them in English


def supported_countries():
    import holidays  # here, not at the top: every process imports the models, few need the holidays

    return holidays.list_supported_countries()


def country_holidays(country, subdivision="", years=None):
    """The ``holidays`` package's holidays of a country (and subdivision), computed per year as asked."""
    import holidays

    found = holidays.country_holidays(country, subdiv=subdivision or None, years=years)
    if HOLIDAYS_LANGUAGE in (found.supported_languages or ()):
        found = holidays.country_holidays(country, subdiv=subdivision or None, years=years,
                                          language=HOLIDAYS_LANGUAGE)
    return found


def normalised_dates(value):
    """``value`` (a list of "YYYY-MM-DD" strings or {"date", "label"} objects) as a sorted list of
    {"date", "label"}, one per date (a date given twice keeps its labels joined); raises
    ValidationError naming the first bad item."""
    if not isinstance(value, list):
        raise ValidationError({"dates": 'Must be a list of dates: "2026-12-25" or {"date": "2026-12-25", '
                                        '"label": "Christmas Day"}.'})
    if len(value) > MAX_DATES:
        raise ValidationError({"dates": f"At most {MAX_DATES} dates in one calendar, got {len(value)}."})
    by_date = {}
    for index, item in enumerate(value):
        if isinstance(item, str | date):
            item = {"date": item}
        if not isinstance(item, dict) or set(item) - {"date", "label"}:
            raise ValidationError({"dates": f"Item {index + 1}: a date is \"YYYY-MM-DD\" or an object with "
                                            "'date' and an optional 'label'."})
        text, label = item.get("date"), item.get("label") or ""
        if isinstance(text, date) and not isinstance(text, datetime):  # a YAML file's date
            text = text.isoformat()
        try:
            day = date.fromisoformat(text) if isinstance(text, str) and len(text) == 10 else None
        except ValueError:
            day = None
        if day is None:
            raise ValidationError({"dates": f"Item {index + 1}: {str(text)[:40]!r} is not a date as YYYY-MM-DD."})
        if not isinstance(label, str) or len(label) > MAX_LABEL or "\x00" in label:
            raise ValidationError({"dates": f"Item {index + 1}: a label is a text of at most {MAX_LABEL} characters."})
        label = " ".join(label.split())
        known = by_date.get(day)
        by_date[day] = label if known is None else "; ".join(filter(None, [known, label])) if label != known else known
    return [{"date": day.isoformat(), "label": by_date[day]} for day in sorted(by_date)]


def dates_text(dates):
    """Dates as a form shows them: one a line, "2026-12-24 Christmas Eve"."""
    return "\n".join(f"{item['date']} {item.get('label', '')}".rstrip() for item in dates)


def dates_from_text(text):
    """A form's lines as dates ({"date", "label"}); a line that does not start with a date is kept
    as it is, for ``normalised_dates`` to name."""
    found = []
    for line in text.splitlines():
        if line.strip():
            day, _, label = line.strip().partition(" ")
            found.append({"date": day, "label": label.strip()})
    return found


class Calendar(Shareable):
    name = models.CharField(
        max_length=100, unique=True, validators=[RegexValidator(NAME_PATTERN, NAME_RULE)],
        help_text=f"How jobs name it (their 'calendars'). {NAME_RULE}",
    )
    description = models.TextField(blank=True)
    dates = models.JSONField(default=list, blank=True,
                             help_text='Dates typed in or imported: [{"date": "2026-12-24", "label": "Christmas Eve"}].')
    country = models.CharField(max_length=3, blank=True,
                               help_text="A country code (DE, US, GB...): its public holidays of every year, from "
                                         "the holidays package, are dates of this calendar too.")
    subdivision = models.CharField(max_length=10, blank=True,
                                   help_text="A state or region of the country (BE for Berlin), for its own holidays.")
    revision = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(verbose_name="created", auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name="updated", auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(subdivision="") | ~models.Q(country=""),
                                   name="calendar_subdivision_needs_country"),
        ]

    def __str__(self):
        return self.name

    def clean(self):
        errors = {}
        try:
            self.dates = normalised_dates(self.dates)
        except ValidationError as exc:
            errors.update(exc.message_dict)
        self.country, self.subdivision = self.country.strip().upper(), self.subdivision.strip()
        countries = supported_countries()
        if self.country and self.country not in countries:
            errors["country"] = [f"{self.country[:10]!r} is not a country the holidays package knows (ISO 3166-1 "
                                 "alpha-2, such as DE, US, GB)."]
        elif self.subdivision and not self.country:
            errors["subdivision"] = ["A subdivision needs a country."]
        elif self.subdivision:
            known = {s.upper(): s for s in countries[self.country]}
            if self.subdivision.upper() not in known:
                errors["subdivision"] = [f"{self.country} has no subdivision {self.subdivision[:10]!r}; it has: "
                                         f"{', '.join(countries[self.country])}."]
            else:
                self.subdivision = known[self.subdivision.upper()]
        if errors:
            raise ValidationError(errors)

    def save(self, *args, **kwargs):
        counted = self.pk is not None
        if counted:
            self.revision = F("revision") + 1
        super().save(*args, **kwargs)
        if counted:
            self.refresh_from_db(fields=["revision"])

    def holidays(self):
        """The country's holidays (a dict-like of date: label, computed per year), or None."""
        return country_holidays(self.country, self.subdivision) if self.country else None

    def holidays_in(self, year):
        """[{"date", "label"}] of the country's holidays in ``year`` (the API and the pages show them)."""
        if not self.country:
            return []
        found = country_holidays(self.country, self.subdivision, years=year)
        return [{"date": day.isoformat(), "label": label} for day, label in sorted(found.items())]


class CalendarDays:
    """One calendar's dates as a lookup: (name, label) pairs of a date, typed-in dates first."""

    def __init__(self, calendar):
        self.name = calendar.name
        self.typed = {date.fromisoformat(item["date"]): item.get("label", "") for item in calendar.dates}
        self.country = calendar.holidays()

    def closure(self, day):
        if day in self.typed:
            return (self.name, self.typed[day])
        if self.country is not None and day in self.country:
            return (self.name, self.country.get(day))
        return None


class DayRulesCache:
    """Per process: each calendar's dates, and a ``DayRules`` per set of a job's rules."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generation, self.checked_at = None, float("-inf")
        self.calendars, self.rules = {}, {}

    def refresh(self, force=False):
        """Forget everything when a calendar was created, changed or deleted since last looked."""
        now = time.monotonic()
        if not force and now - self.checked_at < CHECK_SECONDS:
            return
        # With the moment of the last save: after a rolled-back transaction (a test's) SQLite gives the
        # next calendar the same id again, at the same first revision.
        generation = tuple(Calendar.objects.order_by("pk").values_list("pk", "revision", "updated_at"))
        with self.lock:
            self.checked_at = now
            if generation != self.generation:
                self.generation, self.calendars, self.rules = generation, {}, {}

    def days_of(self, names):
        missing = [name for name in names if name not in self.calendars]
        if missing:
            found = {c.name: CalendarDays(c) for c in Calendar.objects.filter(name__in=missing)}
            with self.lock:
                self.calendars.update(found)
        return [self.calendars[name] for name in names if name in self.calendars]  # unknown names: none

    def day_rules(self, names, business_days, nth):
        """The ``DayRules`` of these calendars (names) and business-day settings."""
        self.refresh()
        key = (tuple(names), bool(business_days), nth)
        rules = self.rules.get(key)
        if rules is None:
            books = self.days_of(key[0])

            def closures(day):
                return [found for book in books if (found := book.closure(day)) is not None]

            rules = DayRules(closures, business_days=key[1], nth=nth)
            with self.lock:
                self.rules[key] = rules
        return rules


day_rules_cache = DayRulesCache()
