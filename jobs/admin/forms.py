"""The admin's job form: the schedule is edited through plain fields and stored as beat rows."""

from django import forms
from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

from .. import kinds
from ..access import secrets
from ..actions.permissions import COMMAND_JOBS_DENIED, guarded_kinds, may_run_command_jobs, queue_refusal
from ..definitions import bound_secrets
from ..definitions.jobs import apply_schedule, parse_schedule, schedule_of
from ..models import Job, ScheduleType

SCHEDULE_FIELDS = ("schedule_type", "cron", "timezone", "every_seconds", "run_at")


class JobAdminForm(forms.ModelForm):
    schedule_type = forms.ChoiceField(choices=ScheduleType.choices, initial=ScheduleType.MANUAL)
    cron = forms.CharField(
        required=False, max_length=200, help_text="Five fields: minute hour day-of-month month weekday."
    )
    timezone = forms.CharField(
        required=False, initial="UTC", max_length=64, help_text="IANA name, e.g. Europe/Berlin."
    )
    every_seconds = forms.IntegerField(label="Every (s)", required=False, min_value=1,
                                       help_text="For an interval schedule.")
    run_at = forms.DateTimeField(
        label="Run at", required=False, help_text="For a one-time schedule: ISO 8601, UTC unless an offset is given."
    )

    class Meta:
        model = Job
        exclude = ["crontab", "interval", "clocked"]

    user = None  # set by JobAdmin.get_form: the person saving

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Secret values are shown masked; the mask sent back keeps the stored value.
        self.stored_secrets = {name: getattr(self.instance, name) for name in secrets.FIELDS}
        for name in set(secrets.FIELDS) & set(self.fields):
            self.initial[name] = secrets.masked(self.stored_secrets[name])
            self.fields[name].help_text += f" Shown as {secrets.MASK}, which keeps the stored value."
        if "target" in self.fields:  # the targets of the kinds that choose theirs from a list
            listed = "; ".join(f"{kinds.get(name).label}: {', '.join(options) or 'none'}"
                               for name, options in kinds.target_options().items())
            self.fields["target"].help_text += f" {listed}."
        self.original_kind, self.original_queue = self.instance.kind, self.instance.queue
        if self.instance.pk:
            spec = schedule_of(self.instance)
            if spec.get("run_at"):
                spec["run_at"] = parse_datetime(spec["run_at"])
            self.initial.update({"schedule_type": spec.pop("type"), **spec})
        self.schedule = None

    def schedule_spec(self):
        data = self.cleaned_data
        kind = data.get("schedule_type")
        if kind == ScheduleType.CRON:
            return {"type": kind, "cron": data.get("cron") or "", "timezone": data.get("timezone") or "UTC"}
        if kind == ScheduleType.INTERVAL:
            return {"type": kind, "every_seconds": data.get("every_seconds")}
        if kind == ScheduleType.ONCE:
            return {"type": kind, "run_at": data.get("run_at")}
        return {"type": kind or ScheduleType.MANUAL}

    def clean_secret_environment(self):
        return self.sealed("secret_environment")

    def clean_secret_http_headers(self):
        return self.sealed("secret_http_headers")

    def sealed(self, name):
        try:
            return secrets.seal(self.cleaned_data.get(name) or {}, self.stored_secrets[name], name)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict[name]) from None

    def clean_kind(self):
        kind = self.cleaned_data.get("kind")
        if {kind, self.original_kind} & guarded_kinds() and not may_run_command_jobs(self.user):
            raise ValidationError(COMMAND_JOBS_DENIED)
        return kind

    def clean_queue(self):
        queue = self.cleaned_data.get("queue", "")
        if (not self.instance.pk or queue != self.original_queue) and (problem := queue_refusal(self.user, queue)):
            raise ValidationError(problem)
        return queue

    def clean(self):
        cleaned = super().clean()
        if any(name in self.errors for name in SCHEDULE_FIELDS):
            return cleaned
        try:
            # The same validation apply_schedule runs first; apply_schedule itself waits for save()
            # so an invalid form leaves no new schedule rows behind.
            self.schedule = parse_schedule(self.schedule_spec())
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error("schedule_type" if field == "schedule" else field, messages)
        return cleaned

    def _post_clean(self):
        super()._post_clean()
        if self.instance.pk:  # the form has set its values on the instance: compared with the row
            stored = Job.objects.filter(pk=self.instance.pk).first()
            for name, message in (bound_secrets.refusals(stored, self.instance) if stored else {}).items():
                self.add_error(name if name in self.fields else None, message)

    def schedule_needs_applying(self):
        if not self.instance.pk:
            return True
        changed = set(self.changed_data)
        # Re-enabling a job starts its schedule again from now, as resume() does.
        return bool(changed & set(SCHEDULE_FIELDS)) or ("enabled" in changed and self.instance.enabled)

    def save(self, commit=True):
        if self.schedule is not None and self.schedule_needs_applying():
            try:
                apply_schedule(self.instance, self.schedule)
            except ValidationError as exc:  # only if the rules changed between clean() and save()
                raise ValueError(f"the schedule became invalid while saving: {exc}") from exc
        return super().save(commit)
