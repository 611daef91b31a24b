"""The fields the models share."""

from django.conf import settings
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


class Owned(models.Model):
    """Whose a row is (a team is a Django group): its ``owner``, who made it (none: staff's, such as
    what the command line makes), and its ``group``, the team it is also shared with. A user sees and
    uses what is theirs, their team's, or (where the model has it) ``shared`` (jobs.actions.permissions)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                              help_text="Who made it (empty: staff's).")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                              help_text="The team it belongs to as well (one of its owner's groups).")

    class Meta:
        abstract = True


class Shareable(Owned):
    # db_default: the previous release's processes, which know no such column, go on making rows while an
    # upgrade runs (docs/operations/upgrading.md).
    shared = models.BooleanField(default=False, db_default=False,
                                 help_text="Seen and used by everyone (only staff set it); changed by staff only.")

    class Meta:
        abstract = True
