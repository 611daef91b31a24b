"""The pages' one form kit: a field as the templates draw it (``_form_field.html``: its label above,
no colon, its help below, its errors under it), made from the job form's fields, from a Django form
(the limit form), or from plain values (the calendar form). The buttons are ``_form_actions.html``:
one primary button ("Create the …" for a new object, "Save" for a stored one) and Cancel."""

from dataclasses import dataclass, field

from django import forms
from django.db import models

NONE = "— none —"  # the empty choice of a select, as the job form words it


@dataclass
class FormField:
    name: str
    label: str
    # text, secret (a password input: a stored secret is never its value), textarea, number, checkbox,
    # checkboxes (several values of ``choices``), select, rows, secret-rows, list, file
    widget: str
    value: object = ""
    help: str = ""
    errors: list = field(default_factory=list)
    choices: list = field(default_factory=list)
    options: list = field(default_factory=list)  # suggestions (a datalist)
    # The target's suggestions for each kind ({kind: [targets]}), a datalist each; the target starts with
    # ``options_kind``'s, and the page switches to the kind chosen.
    options_by_kind: dict = field(default_factory=dict)
    options_kind: str = ""
    step: str = "1"
    rows: int = 3  # a textarea's
    accept: str = ""  # a file input's


def model_widget(model_field):
    if model_field.choices:
        return "select"
    if isinstance(model_field, models.BooleanField):
        return "checkbox"
    if isinstance(model_field, models.IntegerField | models.FloatField):
        return "number"
    if isinstance(model_field, models.TextField):
        return "textarea"
    return "text"


def form_widget(form_field):
    if isinstance(form_field, forms.BooleanField):
        return "checkbox"
    if isinstance(form_field, forms.ChoiceField | forms.ModelChoiceField):
        return "select"
    if isinstance(form_field, forms.IntegerField | forms.FloatField):
        return "number"
    if isinstance(form_field.widget, forms.Textarea):
        return "textarea"
    return "text"


def from_form(form):
    """The kit's fields of a Django form, its values as the form holds them (bound or initial)."""
    found = []
    for bound in form:
        widget = form_widget(bound.field)
        value = bound.value()
        made = FormField(bound.name, str(bound.label), widget, "" if value is None else value, str(bound.help_text),
                         list(bound.errors))
        if widget == "select":
            made.value = "" if value is None else str(value)
            made.choices = [(str(choice), str(text) if choice != "" else NONE) for choice, text in bound.field.choices]
        if widget == "textarea":
            made.rows = int(bound.field.widget.attrs.get("rows", 3))
        if isinstance(bound.field, forms.FloatField):
            made.step = "any"
        found.append(made)
    return found
