"""The fields the models share."""

from django.core.validators import MinValueValidator
from django.db import models


class CountField(models.PositiveIntegerField):
    """A whole number whose form field states the field's own minimum (its MinValueValidator), so a
    form says "at least 1" once, rather than "at least 0" for -5 and then "at least 1" for 0."""

    def formfield(self, **kwargs):
        minimum = max((v.limit_value for v in self.validators if isinstance(v, MinValueValidator)), default=0)
        return super().formfield(**{"min_value": minimum, **kwargs})

    def deconstruct(self):
        # The same column as PositiveIntegerField: migrations see no change (and SQLite no table rebuild).
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.PositiveIntegerField", args, kwargs
